set terminal pngcairo size 900,540 font 'DejaVu Sans,11'
set output 'docs/bench/fig12.png'
set title "Figure 12: Realistic shape: a quantized 1024x16 llama vs llama-server at 1, 4 and 16 streams"
set xlabel ""
set ylabel "Baton / llama-server"
set grid
set bars small
set key outside right top
set xtics ("pp c=1" 0, "tg c=1" 1, "pp c=4" 2, "tg c=4" 3, "pp c=16" 4, "tg c=16" 5)
set xrange [-0.6:5.6]
set style fill solid 0.6 border -1
set yrange [0:*]
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lc rgb 'red'
set label 'target 1.0x' at graph 0.02, first 0.96 tc rgb 'red' front
set boxwidth 0.4
plot 'docs/bench/src/fig12_0.dat' using 1:2:3:4:(0.4) with boxerrorbars title "q4_K" noenhanced, \
     'docs/bench/src/fig12_1.dat' using 1:2:3:4:(0.4) with boxerrorbars title "q8_0" noenhanced

set terminal pngcairo size 900,540 font 'DejaVu Sans,11'
set output 'docs/bench/fig4.png'
set title "Figure 4: Baton node vs llama-server"
set xlabel ""
set ylabel "Baton / llama-server"
set grid
set bars small
set key outside right top
set xtics ("pp c=1" 0, "tg c=1" 1, "pp c=4" 2, "tg c=4" 3)
set xrange [-0.6:3.6]
set style fill solid 0.6 border -1
set yrange [0:*]
set arrow from graph 0, first 0.97 to graph 1, first 0.97 nohead dt 2 lc rgb 'red'
set label 'target 0.97x' at graph 0.02, first 0.93 tc rgb 'red' front
set boxwidth 0.6
plot 'docs/bench/src/fig4_0.dat' using 1:2:3:4:(0.6) with boxerrorbars title "Baton / llama-server" noenhanced

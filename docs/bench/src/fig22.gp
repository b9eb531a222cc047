set terminal pngcairo size 900,540 font 'DejaVu Sans,11'
set output 'docs/bench/fig22.png'
set title "Figure 22: Packed states: size after packing, and the link rate below which packing pays"
set xlabel ""
set ylabel "packed / blob bytes"
set grid
set bars small
set key outside right top
set xtics ("l1 planes" 0, "l3 planes" 1, "l1 bytes" 2)
set xrange [-0.6:2.6]
set style fill solid 0.6 border -1
set yrange [0:*]
set boxwidth 0.266667
plot 'docs/bench/src/fig22_0.dat' using 1:2:3:4:(0.266667) with boxerrorbars title "lfm2_256x4_f16" noenhanced, \
     'docs/bench/src/fig22_1.dat' using 1:2:3:4:(0.266667) with boxerrorbars title "llama512x8_f16" noenhanced, \
     'docs/bench/src/fig22_2.dat' using 1:2:3:4:(0.266667) with boxerrorbars title "llama512x8_q8_0" noenhanced

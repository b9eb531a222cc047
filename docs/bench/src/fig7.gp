set terminal pngcairo size 900,540 font 'DejaVu Sans,11'
set output 'docs/bench/fig7.png'
set title "Figure 7: Interference: decode streams under arriving long prompts"
set xlabel ""
set ylabel "ms"
set grid
set bars small
set key outside right top
set xtics ("TPOT p50" 0, "TPOT p99" 1, "ITL p99" 2)
set xrange [-0.6:2.6]
set style fill solid 0.6 border -1
set yrange [0:*]
set boxwidth 0.4
plot 'docs/bench/src/fig7_0.dat' using 1:2:3:4:(0.4) with boxerrorbars title "colocated" noenhanced, \
     'docs/bench/src/fig7_1.dat' using 1:2:3:4:(0.4) with boxerrorbars title "pd" noenhanced

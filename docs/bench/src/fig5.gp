set terminal pngcairo size 900,540 font 'DejaVu Sans,11'
set output 'docs/bench/fig5.png'
set title "Figure 5: Router under load"
set xlabel "concurrent clients"
set ylabel "P99 latency (ms)"
set grid
set bars small
set key inside top left box opaque
set logscale x 2
set logscale y
set offsets graph 0.05, graph 0.05, graph 0.1, graph 0.1
plot 'docs/bench/src/fig5_0.dat' using 1:2 with linespoints lw 2 pt 7 title "pd P99 TPOT ms" noenhanced, \
     'docs/bench/src/fig5_1.dat' using 1:2 with linespoints lw 2 pt 7 title "pd P99 TTFT ms" noenhanced, \
     'docs/bench/src/fig5_2.dat' using 1:2 with linespoints lw 2 pt 7 title "single P99 TPOT ms" noenhanced, \
     'docs/bench/src/fig5_3.dat' using 1:2 with linespoints lw 2 pt 7 title "single P99 TTFT ms" noenhanced

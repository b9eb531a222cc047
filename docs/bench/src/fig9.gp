set terminal pngcairo size 900,540 font 'DejaVu Sans,11'
set output 'docs/bench/fig9.png'
set title "Figure 9: Router overhead: streams through baton route vs straight to the node"
set xlabel "concurrent streams"
set ylabel "P50 latency (ms)"
set grid
set bars small
set key inside top left box opaque
set logscale x 2
set logscale y
set offsets graph 0.05, graph 0.05, graph 0.1, graph 0.1
plot 'docs/bench/src/fig9_0.dat' using 1:2 with linespoints lw 2 pt 7 title "direct P50 TPOT" noenhanced, \
     'docs/bench/src/fig9_1.dat' using 1:2 with linespoints lw 2 pt 7 title "direct P50 TTFT" noenhanced, \
     'docs/bench/src/fig9_2.dat' using 1:2 with linespoints lw 2 pt 7 title "router P50 TPOT" noenhanced, \
     'docs/bench/src/fig9_3.dat' using 1:2 with linespoints lw 2 pt 7 title "router P50 TTFT" noenhanced

set terminal pngcairo size 900,540 font 'DejaVu Sans,11'
set output 'docs/bench/fig2.png'
set title "Figure 2: PD time-to-first-token overhead (loopback)"
set xlabel "prompt tokens"
set ylabel "TTFT (ms)"
set grid
set bars small
set key inside top left box opaque
set logscale x 2
set logscale y
set offsets graph 0.05, graph 0.05, graph 0.1, graph 0.1
plot 'docs/bench/src/fig2_0.dat' using 1:2:3:4 with yerrorlines lw 2 pt 7 title "PD (relay) TTFT ms" noenhanced, \
     'docs/bench/src/fig2_1.dat' using 1:2:3:4 with yerrorlines lw 2 pt 7 title "PD (router) TTFT ms" noenhanced, \
     'docs/bench/src/fig2_2.dat' using 1:2:3:4 with yerrorlines lw 2 pt 7 title "single node TTFT ms" noenhanced

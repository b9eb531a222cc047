set terminal pngcairo size 900,540 font 'DejaVu Sans,11'
set output 'docs/bench/fig23.png'
set title "Figure 23: Streamed transfer: TTFT with the state sent whole after the prompt vs streamed while it computes"
set xlabel "link rate (Mbit/s)"
set ylabel "TTFT (ms)"
set grid
set bars small
set key inside top left box opaque
set logscale x 2
set offsets graph 0.05, graph 0.05, graph 0.1, graph 0.1
plot 'docs/bench/src/fig23_0.dat' using 1:2:3:4 with yerrorlines lw 2 pt 7 title "PD, state streamed" noenhanced, \
     'docs/bench/src/fig23_1.dat' using 1:2:3:4 with yerrorlines lw 2 pt 7 title "PD, state whole" noenhanced, \
     'docs/bench/src/fig23_2.dat' using 1:2:3:4 with yerrorlines lw 2 pt 7 title "single node" noenhanced

set terminal pngcairo size 900,540 font 'DejaVu Sans,11'
set output 'docs/bench/fig1.png'
set title "Figure 1: Restore vs recompute"
set xlabel "prompt tokens"
set ylabel "restore / prefill (%)"
set grid
set bars small
set key inside top left box opaque
set logscale x 2
set logscale y
set offsets graph 0.05, graph 0.05, graph 0.1, graph 0.1
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lc rgb 'red'
set label 'target 1%' at graph 0.02, first 1.15 tc rgb 'red'
plot 'docs/bench/src/fig1_0.dat' using 1:2:3:4 with yerrorlines lw 2 pt 7 title "granitehybrid restore % of prefill" noenhanced, \
     'docs/bench/src/fig1_1.dat' using 1:2:3:4 with yerrorlines lw 2 pt 7 title "llama restore % of prefill" noenhanced

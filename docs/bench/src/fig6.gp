set terminal pngcairo size 900,540 font 'DejaVu Sans,11'
set output 'docs/bench/fig6.png'
set title "Figure 6: Blob size per token vs theoretical KV size"
set xlabel "prompt tokens"
set ylabel "blob bytes per token over KV (%)"
set grid
set bars small
set key inside top left box opaque
set logscale x 2
set offsets graph 0.05, graph 0.05, graph 0.1, graph 0.1
set arrow from graph 0, first 2 to graph 1, first 2 nohead dt 2 lc rgb 'red'
set label 'target 2%' at graph 0.02, first 2.1 tc rgb 'red'
set yrange [0:*]
plot 'docs/bench/src/fig6_0.dat' using 1:2:3:4 with yerrorlines lw 2 pt 7 title "overhead %" noenhanced

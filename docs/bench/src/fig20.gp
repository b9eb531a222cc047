set terminal pngcairo size 900,540 font 'DejaVu Sans,11'
set output 'docs/bench/fig20.png'
set title "Figure 20: Embeddings throughput vs llama-server"
set xlabel "inputs per request"
set ylabel "inputs/s"
set grid
set bars small
set key inside top left box opaque
set logscale x 2
set offsets graph 0.05, graph 0.05, graph 0.1, graph 0.1
plot 'docs/bench/src/fig20_0.dat' using 1:2:3:4 with yerrorlines lw 2 pt 7 title "baton" noenhanced, \
     'docs/bench/src/fig20_1.dat' using 1:2:3:4 with yerrorlines lw 2 pt 7 title "llama-server" noenhanced

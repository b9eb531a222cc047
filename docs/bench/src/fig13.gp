set terminal pngcairo size 900,540 font 'DejaVu Sans,11'
set output 'docs/bench/fig13.png'
set title "Figure 13: KV cache type and device: blob bytes per token, restore into a device-resident cache"
set xlabel "prompt tokens"
set ylabel "blob bytes per token"
set grid
set bars small
set key inside top left box opaque
set offsets graph 0.05, graph 0.05, graph 0.1, graph 0.1
plot 'docs/bench/src/fig13_0.dat' using 1:2:3:4 with yerrorlines lw 2 pt 7 title "f16 KV bytes/token" noenhanced, \
     'docs/bench/src/fig13_1.dat' using 1:2:3:4 with yerrorlines lw 2 pt 7 title "q8_0 KV bytes/token" noenhanced

set terminal pngcairo size 900,540 font 'DejaVu Sans,11'
set output 'docs/bench/fig19.png'
set title "Figure 19: The Valkey tier: fetch and store throughput against raw RESP, and entry size by KV type"
set xlabel "entry (MiB)"
set ylabel "MB/s"
set grid
set bars small
set key inside top left box opaque
set logscale x 2
set offsets graph 0.05, graph 0.05, graph 0.1, graph 0.1
set offsets graph 0.05, graph 0.05, graph 0.1, 0
set yrange [0:*]
plot 'docs/bench/src/fig19_0.dat' using 1:2:3:4 with yerrorlines lw 2 pt 7 title "raw GET" noenhanced, \
     'docs/bench/src/fig19_1.dat' using 1:2:3:4 with yerrorlines lw 2 pt 7 title "raw SET" noenhanced, \
     'docs/bench/src/fig19_2.dat' using 1:2:3:4 with yerrorlines lw 2 pt 7 title "tier get, parts of 16 MiB" noenhanced, \
     'docs/bench/src/fig19_3.dat' using 1:2:3:4 with yerrorlines lw 2 pt 7 title "tier get, parts of 4 MiB" noenhanced, \
     'docs/bench/src/fig19_4.dat' using 1:2:3:4 with yerrorlines lw 2 pt 7 title "tier put, parts of 16 MiB" noenhanced, \
     'docs/bench/src/fig19_5.dat' using 1:2:3:4 with yerrorlines lw 2 pt 7 title "tier put, parts of 4 MiB" noenhanced

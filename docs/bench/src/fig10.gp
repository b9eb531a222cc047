set terminal pngcairo size 900,540 font 'DejaVu Sans,11'
set output 'docs/bench/fig10.png'
set title "Figure 10: Cluster: joins, kills and a rolling restart through etcd"
set xlabel ""
set ylabel "request latency (ms)"
set grid
set bars small
set key outside right top
set xtics ("P50" 0, "P99" 1)
set xrange [-0.6:1.6]
set style fill solid 0.6 border -1
set yrange [0:*]
set boxwidth 0.4
plot 'docs/bench/src/fig10_0.dat' using 1:2:3:4:(0.4) with boxerrorbars title "rolling restart" noenhanced, \
     'docs/bench/src/fig10_1.dat' using 1:2:3:4:(0.4) with boxerrorbars title "steady state" noenhanced

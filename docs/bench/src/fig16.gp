set terminal pngcairo size 900,540 font 'DejaVu Sans,11'
set output 'docs/bench/fig16.png'
set title "Figure 16: Scaling past the router's link: direct transfer vs relay over shaped links"
set xlabel ""
set ylabel "aggregate KV MB/s"
set grid
set bars small
set key outside right top
set xtics ("direct" 0, "relay" 1)
set xrange [-0.6:1.6]
set style fill solid 0.6 border -1
set yrange [0:*]
set boxwidth 0.6
plot 'docs/bench/src/fig16_0.dat' using 1:2:3:4:(0.6) with boxerrorbars title "aggregate KV MB/s" noenhanced

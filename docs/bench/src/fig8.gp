set terminal pngcairo size 900,540 font 'DejaVu Sans,11'
set output 'docs/bench/fig8.png'
set title "Figure 8: HTTP edge: a 16 MiB blob through real nodes vs raw TCP"
set xlabel ""
set ylabel "GB/s"
set grid
set bars small
set key outside right top
set xtics ("raw up" 0, "raw down" 1, "upload" 2, "download" 3, "dl httplib" 4, "relay metric" 5, "relay in-out" 6)
set xrange [-0.6:6.6]
set style fill solid 0.6 border -1
set yrange [0:*]
set boxwidth 0.6
plot 'docs/bench/src/fig8_0.dat' using 1:2:3:4:(0.6) with boxerrorbars title "GB/s" noenhanced

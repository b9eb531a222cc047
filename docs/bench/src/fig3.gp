set terminal pngcairo size 900,540 font 'DejaVu Sans,11'
set output 'docs/bench/fig3.png'
set title "Figure 3: Blob pipeline throughput vs memcpy"
set xlabel ""
set ylabel "GB/s"
set grid
set bars small
set key outside right top
set logscale y
set xtics ("serialize" 0, "checksum" 1, "verify" 2, "loopback POST" 3, "memcpy" 4)
set xrange [-0.6:4.6]
set style fill solid 0.6 border -1
set boxwidth 0.6
plot 'docs/bench/src/fig3_0.dat' using 1:2:3:4:(0.6) with boxerrorbars title "GB/s" noenhanced

set terminal pngcairo size 900,540 font 'DejaVu Sans,11'
set output 'docs/bench/fig21.png'
set title "Figure 21: Images and audio: time to first token through PD, vs llama-server, and the decode node's memory"
set xlabel ""
set ylabel "TTFT (ms)"
set grid
set bars small
set key outside right top
set xtics ("baton single" 0, "baton PD" 1, "llama-server" 2)
set xrange [-0.6:2.6]
set style fill solid 0.6 border -1
set yrange [0:*]
set boxwidth 0.6
plot 'docs/bench/src/fig21_0.dat' using 1:2:3:4:(0.6) with boxerrorbars title "TTFT ms" noenhanced

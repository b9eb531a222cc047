set terminal pngcairo size 900,540 font 'DejaVu Sans,11'
set output 'docs/bench/fig11.png'
set title "Figure 11: Structured output: grammar cost per token, and n = 4 through PD"
set xlabel ""
set ylabel "generation tok/s"
set grid
set bars small
set key outside right top
set xtics ("free" 0, "grammar" 1)
set xrange [-0.6:1.6]
set style fill solid 0.6 border -1
set yrange [0:*]
set boxwidth 0.4
plot 'docs/bench/src/fig11_0.dat' using 1:2:3:4:(0.4) with boxerrorbars title "baton" noenhanced, \
     'docs/bench/src/fig11_1.dat' using 1:2:3:4:(0.4) with boxerrorbars title "llama_server" noenhanced

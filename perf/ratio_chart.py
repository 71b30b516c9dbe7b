"""A PNG bar chart of ratios (gnuplot), shared by the benchmark reports.

draw(bars, png, title, ylabel) takes bars as (label, ratio, good) tuples:
green bars are good for pg_rdma, red ones are not, and a dashed line marks
`reference` (1.0, parity, unless said). Returns False, saying why on
stderr, when gnuplot is missing or fails: a report without its chart is
still a report.
"""
import subprocess
import sys

GOOD = "0x2E8B57"
BAD = "0xC0392B"


def draw(bars, png, title, ylabel, reference=1.0):
    if not bars:
        return False
    data = png[:-4] + ".dat" if png.endswith(".png") else png + ".dat"
    with open(data, "w", encoding="utf-8") as f:
        for label, ratio, good in bars:
            label = label.replace('"', "'")
            f.write(f"\"{label}\" {ratio:.4f} {GOOD if good else BAD}\n")
    script = f"""
set terminal pngcairo size 1300,720 font ",10"
set output "{png}"
set title "{title}" noenhanced
set style fill solid 0.7
set boxwidth 0.7
set grid ytics
set yrange [0:*]
set xtics rotate by -35 left noenhanced
set ylabel "{ylabel}" noenhanced
set bmargin 12
set rmargin 18
set arrow from graph 0, first {reference} to graph 1, first {reference} nohead dashtype 2 lw 2
plot "{data}" using 0:2:3:xtic(1) with boxes lc rgb variable notitle, \\
     "" using 0:2:(sprintf("%.2f", $2)) with labels offset 0,0.7 notitle
"""
    try:
        subprocess.run(["gnuplot"], input=script, text=True, check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"no chart: gnuplot: {e}", file=sys.stderr)
        return False
    return True

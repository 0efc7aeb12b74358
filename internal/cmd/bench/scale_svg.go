package main

import (
	"fmt"
	"math"
	"strings"
)

// panel is one chart's plotting area, in the SVG's units.
type panel struct{ x, y, w, h float64 }

// series is one line of a chart, or one layer of a stacked bar.
type series struct {
	name, color string
	values      []float64 // one per N
}

// chart is docs/scale.svg: bytes per connection by key kind against N
// (stacked, the main configuration, with its limit), and the worker's
// commands against N, each as a multiple of the PING timed beside it (the
// shared machine's round trip swings more between runs than N moves them).
func (r *scaleResult) chart() string {
	var b strings.Builder
	b.WriteString(`<svg xmlns="http://www.w3.org/2000/svg" width="960" height="440" viewBox="0 0 960 440" font-family="sans-serif" font-size="12">` + "\n")
	b.WriteString(`<rect width="960" height="440" fill="#fff"/>` + "\n")
	names := make([]string, len(r.points))
	for i, p := range r.points {
		names[i] = "N = " + commas(p.n)
	}
	r.bytesPanel(&b, panel{x: 70, y: 40, w: 370, h: 290}, names)
	r.claimPanel(&b, panel{x: 560, y: 40, w: 370, h: 290}, names)
	b.WriteString("</svg>\n")
	return b.String()
}

func (r *scaleResult) bytesPanel(b *strings.Builder, p panel, names []string) {
	colors := []string{"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#bab0ac", "#ff9da7", "#af7aa1"}
	kinds := r.connectionKinds()
	layers := make([]series, len(kinds))
	for i, k := range kinds {
		layers[i] = series{name: strings.Split(k.label, " `")[0], color: colors[i%len(colors)]}
	}
	var top float64
	for _, pt := range r.points {
		c := pt.main()
		for i, k := range kinds {
			layers[i].values = append(layers[i].values, c.perConn(k.name, pt.n))
		}
		top = max(top, float64(c.census.total())/float64(pt.n), pt.limit())
	}
	yMax := niceMax(top * 1.1)
	p.axes(b, "Redis bytes per connection (encryption on, refresh ahead on)", "bytes", yMax, names)
	slot := p.w / float64(max(len(r.points), 1))
	for i, pt := range r.points {
		x, base := p.x+slot*(float64(i)+0.5), 0.0
		for _, l := range layers {
			y0, y1 := p.yOf(base, yMax), p.yOf(base+l.values[i], yMax)
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n", x-slot/5, y1, slot*2/5, y0-y1, l.color)
			base += l.values[i]
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%.0f B</text>`+"\n", x, p.yOf(base, yMax)-4, base)
		ly := p.yOf(pt.limit(), yMax)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e15759" stroke-width="2" stroke-dasharray="5,3"/>`+"\n", x-slot*0.3, ly, x+slot*0.3, ly)
	}
	legend(b, p, append(layers, series{name: fmt.Sprintf("limit: %d token bytes and one key", tokenBytes), color: "#e15759"}))
}

func (r *scaleResult) claimPanel(b *strings.Builder, p panel, names []string) {
	lines := []series{{name: "idle pass (nothing due)", color: "#4e79a7"}, {name: "claim of 1 due", color: "#59a14f"},
		{name: fmt.Sprintf("claim of %d due", batch), color: "#f28e2b"}, {name: "limit: PING", color: "#e15759"}}
	var top float64
	for _, pt := range r.points {
		w := pt.worker
		for i, v := range []float64{w.idle.median, w.one.median, w.hundred.median, w.ping.median} {
			lines[i].values = append(lines[i].values, v/w.ping.median)
			top = max(top, v/w.ping.median)
		}
	}
	yMax := niceMax(top * 1.1)
	p.axes(b, "The worker's claim on the due index, in PINGs", "median time / an interleaved PING's", yMax, names)
	slot := p.w / float64(max(len(r.points), 1))
	for _, l := range lines {
		var pts []string
		for i, v := range l.values {
			x, y := p.x+slot*(float64(i)+0.5), p.yOf(v, yMax)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>`+"\n", x, y, l.color)
		}
		fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), l.color)
	}
	legend(b, p, lines)
}

// axes draws the title, the y axis with its grid and the N under each slot.
func (p panel) axes(b *strings.Builder, title, unit string, yMax float64, names []string) {
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="14" font-weight="bold">%s</text>`+"\n", p.x-50, p.y-20, title)
	for i := 0; i <= 5; i++ {
		v := yMax * float64(i) / 5
		y := p.yOf(v, yMax)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", p.x, y, p.x+p.w, y)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%g</text>`+"\n", p.x-6, y+4, v)
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" transform="rotate(-90 %.1f %.1f)">%s</text>`+"\n",
		p.x-48, p.y+p.h/2, p.x-48, p.y+p.h/2, unit)
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", p.x, p.y+p.h, p.x+p.w, p.y+p.h)
	slot := p.w / float64(max(len(names), 1))
	for i, n := range names {
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", p.x+slot*(float64(i)+0.5), p.y+p.h+16, n)
	}
}

func (p panel) yOf(v, yMax float64) float64 { return p.y + p.h - p.h*v/yMax }

// legend lists the series under the panel, two to a row.
func legend(b *strings.Builder, p panel, ss []series) {
	for i, s := range ss {
		x, y := p.x+float64(i%2)*p.w/2, p.y+p.h+36+float64(i/2)*18
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="12" height="12" fill="%s"/><text x="%.1f" y="%.1f">%s</text>`+"\n", x, y-10, s.color, x+16, y, s.name)
	}
}

// niceMax is the least of 1, 2 or 5 times a power of ten at or above v.
func niceMax(v float64) float64 {
	if v <= 0 {
		return 1
	}
	mag := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= v {
			return m * mag
		}
	}
	return 10 * mag
}

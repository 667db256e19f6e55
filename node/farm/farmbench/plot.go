package farmbench

import (
	"fmt"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Plot writes a PNG of r: events per second (left) and median latency
// (right) against fragment size, log scales, one line per protocol and
// queue limit, the predicted crossovers as vertical lines.
func Plot(r *Result, file string) error {
	rate, lat := plot.New(), plot.New()
	rate.Title.Text = fmt.Sprintf("%d RUs → 1 BU, %s link: events/s", r.Config.RUs, r.Config.Rate)
	lat.Title.Text = "latency, readout to built (median)"
	for _, p := range []*plot.Plot{rate, lat} {
		p.X.Label.Text = "fragment bytes"
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{}
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{}
		p.Legend.Left = true
	}
	rate.Y.Label.Text = "events/s"
	lat.Y.Label.Text = "µs"
	colours := []color.Color{color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xd6, 0x27, 0x28, 0xff},
		color.RGBA{0x2c, 0xa0, 0x2c, 0xff}, color.RGBA{0xff, 0x7f, 0x0e, 0xff}}
	i := 0
	for qi, q := range r.Config.Queues {
		for _, proto := range []string{"push", "pull"} {
			var xr, xl plotter.XYs
			for _, p := range r.Points {
				if p.Queue != q || p.Protocol != proto {
					continue
				}
				if p.EventsPerSec > 0 {
					xr = append(xr, plotter.XY{X: float64(p.Size), Y: p.EventsPerSec})
				}
				if p.P50 > 0 {
					xl = append(xl, plotter.XY{X: float64(p.Size), Y: float64(p.P50.Microseconds()) + 1})
				}
			}
			name := fmt.Sprintf("%s, queue %d KiB", proto, q>>10)
			for _, d := range []struct {
				p  *plot.Plot
				xy plotter.XYs
			}{{rate, xr}, {lat, xl}} {
				if len(d.xy) == 0 {
					continue
				}
				l, s, err := plotter.NewLinePoints(d.xy)
				if err != nil {
					return err
				}
				l.Color, s.Color = colours[i%len(colours)], colours[i%len(colours)]
				if proto == "pull" {
					l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
					s.Shape = draw.TriangleGlyph{}
				}
				d.p.Add(l, s)
				d.p.Legend.Add(name, l, s)
			}
			i++
		}
		// The predicted crossover of this queue limit.
		x := r.Predicted[q]
		if x > 0 && len(r.Points) > 0 {
			lo, hi := 1e300, 0.0
			for _, p := range r.Points {
				if p.EventsPerSec > 0 {
					lo, hi = min(lo, p.EventsPerSec), max(hi, p.EventsPerSec)
				}
			}
			if hi > 0 {
				v, err := plotter.NewLine(plotter.XYs{{X: x, Y: lo}, {X: x, Y: hi}})
				if err != nil {
					return err
				}
				v.Color = colours[(2*qi)%len(colours)]
				v.Dashes = []vg.Length{vg.Points(1), vg.Points(3)}
				rate.Add(v)
				rate.Legend.Add(fmt.Sprintf("predicted crossover, queue %d KiB", q>>10), v)
			}
		}
	}
	img := vgimg.New(vg.Points(1100), vg.Points(450))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Points(10), PadY: vg.Points(10), PadTop: vg.Points(5), PadBottom: vg.Points(5), PadLeft: vg.Points(5), PadRight: vg.Points(5)}
	canvases := plot.Align([][]*plot.Plot{{rate, lat}}, tiles, dc)
	rate.Draw(canvases[0][0])
	lat.Draw(canvases[0][1])
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	png := vgimg.PngCanvas{Canvas: img}
	if _, err := png.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

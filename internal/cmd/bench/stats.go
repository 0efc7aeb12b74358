package main

import (
	"fmt"
	"math"
	"slices"
)

// sample is one figure over the rounds.
type sample []float64

func (s sample) median() float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	c := slices.Clone(s)
	slices.Sort(c)
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}

func (s sample) min() float64 { return slices.Min(append(sample{math.Inf(1)}, s...)) }
func (s sample) max() float64 { return slices.Max(append(sample{math.Inf(-1)}, s...)) }

// format writes "median (min – max)", or the one value of a single round.
func (s sample) format(unit string, digits int) string {
	if len(s) == 0 {
		return "n/a"
	}
	f := func(v float64) string { return fmt.Sprintf("%.*f", digits, v) }
	if len(s) == 1 || s.min() == s.max() {
		return f(s.median()) + unit
	}
	return fmt.Sprintf("%s%s (%s – %s)", f(s.median()), unit, f(s.min()), f(s.max()))
}

// scaled is s with every value times f.
func (s sample) scaled(f float64) sample {
	r := make(sample, len(s))
	for i, v := range s {
		r[i] = v * f
	}
	return r
}

// ratios divides a by b round by round (both measured in the same round).
func ratios(a, b sample) sample {
	r := make(sample, 0, len(a))
	for i := range min(len(a), len(b)) {
		if b[i] != 0 {
			r = append(r, a[i]/b[i])
		}
	}
	return r
}

// goroutines names a count of goroutines: "1 goroutine", "8 goroutines".
func goroutines(n int) string {
	if n == 1 {
		return "1 goroutine"
	}
	return fmt.Sprintf("%d goroutines", n)
}

package main

import (
	"slices"
	"testing"
)

func TestLayerPutsEachFileAboveWhatItUses(t *testing.T) {
	t.Parallel()
	refs, err := fileRefs("testdata/three")
	if err != nil {
		t.Fatal(err)
	}
	want := []ref{{"b.go", "a.go", "A"}, {"c.go", "b.go", "B"}, {"c.go", "b.go", "b2"}, {"d.go", "c.go", "C"}}
	if !slices.Equal(refs, want) {
		t.Fatalf("refs = %v, want %v", refs, want)
	}
	order, up := layer(refs)
	if !slices.Equal(order, []string{"a.go", "b.go", "c.go", "d.go"}) || up != 0 {
		t.Fatalf("layer = %v with %d up, want a, b, c, d with 0", order, up)
	}
}

func TestLayerCountsWhatRunsBackUp(t *testing.T) {
	t.Parallel()
	refs := []ref{{"a.go", "b.go", "X"}, {"b.go", "a.go", "Y"}, {"b.go", "a.go", "Z"}}
	order, up := layer(refs)
	if !slices.Equal(order, []string{"a.go", "b.go"}) || up != 1 {
		t.Fatalf("layer = %v with %d up, want a below b with the one reference from a running up", order, up)
	}
	if got := countUp([]string{"b.go", "a.go"}, refs); got != 2 {
		t.Fatalf("countUp with b below a = %d, want 2", got)
	}
}

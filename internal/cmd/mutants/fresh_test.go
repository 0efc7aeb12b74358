package main

import (
	"context"
	"testing"
)

// Every entry of the table still names code that is there, once: a change
// that moves a guard's text fails here, at once, rather than in the next
// mutation run, which takes the better part of an hour.
func TestTableMatchesTheCode(t *testing.T) {
	root, err := moduleRoot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range table() {
		if _, _, err := m.mutate(root); err != nil {
			t.Errorf("%s: %v", m.Name, err)
		}
	}
}

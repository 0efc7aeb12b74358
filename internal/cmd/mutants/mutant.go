package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// mutant is one deliberate bug: Old, found exactly once in File, becomes New.
// The tests named by Run in package Pkg should notice it.
type mutant struct {
	Name string // unique; -run selects on it
	File string // slash-separated, relative to the module root
	Pkg  string // the package pattern go test runs, relative to the module root; "" means "."
	Old  string // exact text, present exactly once in File
	New  string
	Run  string // go test -run pattern; "" runs every test of Pkg
	Why  string // the guard the mutant breaks, in one line
}

func (m mutant) pkg() string {
	if m.Pkg == "" {
		return "."
	}
	return m.Pkg
}

// module is where m's tests run: the directory of the module File belongs
// to (the nearest go.mod above it, a nested module such as temporal/ when it
// has one, else root) and m's package pattern relative to that directory.
func (m mutant) module(root string) (dir, pkg string) {
	dir = filepath.Dir(filepath.Join(root, filepath.FromSlash(m.File)))
	for ; dir != root && strings.HasPrefix(dir, root+string(filepath.Separator)); dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			rel, err := filepath.Rel(dir, filepath.Join(root, filepath.FromSlash(m.pkg())))
			if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				return dir, m.pkg() // a pattern outside the nested module: go test says so
			}
			return dir, "./" + filepath.ToSlash(rel)
		}
	}
	return root, m.pkg()
}

// errStale means the table no longer matches the code: Old is not in File exactly once.
var errStale = errors.New("stale")

// apply returns src with m.Old replaced by m.New.
func (m mutant) apply(src []byte) ([]byte, error) {
	if n := bytes.Count(src, []byte(m.Old)); n != 1 {
		return nil, fmt.Errorf("%w: the old text is in %s %d times, not once", errStale, m.File, n)
	}
	return bytes.Replace(src, []byte(m.Old), []byte(m.New), 1), nil
}

// mutate reads m.File under root and returns its absolute path and mutated text.
// A missing file is stale, like a missing snippet.
func (m mutant) mutate(root string) (path string, src []byte, err error) {
	path = filepath.Join(root, filepath.FromSlash(m.File))
	orig, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil, fmt.Errorf("%w: %s does not exist", errStale, m.File)
	}
	if err != nil {
		return "", nil, err
	}
	src, err = m.apply(orig)
	return path, src, err
}

// writeOverlay writes src under dir as the stand-in for the file at path and
// returns the go command's -overlay file, which maps path to it. Nothing is
// written next to path itself.
func writeOverlay(dir, path string, src []byte) (string, error) {
	stand := filepath.Join(dir, filepath.Base(path))
	if err := os.WriteFile(stand, src, 0o644); err != nil {
		return "", err
	}
	cfg, err := json.Marshal(struct{ Replace map[string]string }{map[string]string{path: stand}})
	if err != nil {
		return "", err
	}
	overlay := filepath.Join(dir, "overlay.json")
	return overlay, os.WriteFile(overlay, cfg, 0o644)
}

// checkTable reports the first entry that cannot be a mutant at all.
func checkTable(ms []mutant) error {
	seen := make(map[string]bool)
	for i, m := range ms {
		switch {
		case m.Name == "" || seen[m.Name]:
			return fmt.Errorf("entry %d: name %q is empty or used twice", i, m.Name)
		case m.File == "" || m.Old == "" || m.Why == "":
			return fmt.Errorf("mutant %s: file, old and why are required", m.Name)
		case m.Old == m.New:
			return fmt.Errorf("mutant %s: new is the same as old", m.Name)
		}
		seen[m.Name] = true
	}
	return nil
}

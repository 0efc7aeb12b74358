// Command filerefs measures how the files of one Go package lean on each
// other: which file uses a name (a top-level declaration or a method)
// declared in which other file, and how many of those references run back up
// when the files are laid out in layers, each file above the files it uses.
//
//	go run ./internal/cmd/filerefs [-v] [DIR]
//
// DIR is the package's folder (the module root by default); test files are
// left out. A reference is counted once per pair of files and name. The
// layering is the order of the files that leaves the fewest references
// running back up, found by a deterministic local search (moving one file at
// a time to its best place until no move helps); it is a good order, not
// always the best one. With -v it prints the order and every reference that
// runs back up.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

func main() {
	verbose := flag.Bool("v", false, "print the layering and each reference that runs back up")
	flag.Parse()
	dir := "."
	if flag.NArg() > 0 {
		dir = flag.Arg(0)
	}
	refs, err := fileRefs(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "filerefs:", err)
		os.Exit(1)
	}
	report(os.Stdout, refs, *verbose)
}

// ref is one name that file from uses and file to declares.
type ref struct{ from, to, name string }

// fileRefs reads the package in dir and returns its references between files.
func fileRefs(dir string) ([]ref, error) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		return nil, err
	}
	if len(pkgs) != 1 {
		return nil, fmt.Errorf("%s holds %d packages, want 1", dir, len(pkgs))
	}
	var files []*ast.File
	for _, p := range pkgs {
		for _, f := range p.Files {
			files = append(files, f)
		}
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	pkg, err := conf.Check(dir, fset, files, info)
	if err != nil {
		return nil, err
	}
	seen := map[ref]bool{}
	for id, obj := range info.Uses {
		if obj == nil || obj.Pkg() != pkg || !obj.Pos().IsValid() {
			continue
		}
		if _, isFunc := obj.(*types.Func); obj.Parent() != pkg.Scope() && !isFunc {
			continue // a local, a parameter or a field
		}
		r := ref{filepath.Base(fset.Position(id.Pos()).Filename), filepath.Base(fset.Position(obj.Pos()).Filename), obj.Name()}
		if r.from != r.to {
			seen[r] = true
		}
	}
	out := make([]ref, 0, len(seen))
	for r := range seen {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.from+"\x00"+a.to+"\x00"+a.name < b.from+"\x00"+b.to+"\x00"+b.name
	})
	return out, nil
}

// layer orders files from the ground up so that few references run back up
// (from a file to one above it), and returns the order and that count.
func layer(refs []ref) ([]string, int) {
	weight := map[[2]string]int{}
	var files []string
	for _, r := range refs {
		weight[[2]string{r.from, r.to}]++
		for _, f := range []string{r.from, r.to} {
			if !slices.Contains(files, f) {
				files = append(files, f)
			}
		}
	}
	sort.Strings(files)
	up := func(order []string, f string, at int) int { // f's references running up with f at index at
		n := 0
		for i, g := range order {
			if g == f {
				continue
			}
			if i > at {
				n += weight[[2]string{f, g}]
			} else {
				n += weight[[2]string{g, f}]
			}
		}
		return n
	}
	order := slices.Clone(files)
	for moved := true; moved; {
		moved = false
		for _, f := range files {
			i := slices.Index(order, f)
			rest := slices.Delete(slices.Clone(order), i, i+1)
			best, bestAt := -1, i
			for at := 0; at <= len(rest); at++ {
				trial := slices.Insert(slices.Clone(rest), at, f)
				if c := up(trial, f, at); best < 0 || c < best {
					best, bestAt = c, at
				}
			}
			if best < up(order, f, i) {
				order = slices.Insert(rest, bestAt, f)
				moved = true
			}
		}
	}
	return order, countUp(order, refs)
}

// countUp counts the references that run from a file to one above it.
func countUp(order []string, refs []ref) int {
	n := 0
	for _, r := range refs {
		if slices.Index(order, r.to) > slices.Index(order, r.from) {
			n++
		}
	}
	return n
}

func report(w io.Writer, refs []ref, verbose bool) {
	order, up := layer(refs)
	pairs := map[[2]string]bool{}
	for _, r := range refs {
		pairs[[2]string{r.from, r.to}] = true
	}
	fmt.Fprintf(w, "%d files, %d references between files (%d pairs), %d run back up\n", len(order), len(refs), len(pairs), up)
	if !verbose {
		return
	}
	fmt.Fprintln(w, "layers, from the ground up:")
	for i, f := range order {
		fmt.Fprintf(w, "  %2d %s\n", i+1, f)
	}
	fmt.Fprintln(w, "references that run back up:")
	for _, r := range refs {
		if slices.Index(order, r.to) > slices.Index(order, r.from) {
			fmt.Fprintf(w, "  %s -> %s: %s\n", r.from, r.to, r.name)
		}
	}
}

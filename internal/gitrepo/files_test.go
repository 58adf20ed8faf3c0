package gitrepo

import (
	"context"
	"slices"
	"testing"
)

// TestFilesOfATreeListedOnce: Files lists a tree's files the same however
// often it is asked and whatever a caller did with an earlier answer, and
// another tree's files after it; Changes between a tree and itself is
// nothing.
func TestFilesOfATreeListedOnce(t *testing.T) {
	dir := newRepo(t)
	r := openRepo(t, dir)
	ctx := context.Background()
	write(t, dir, map[string]string{"a.txt": "a\n", "src/b.txt": "b\n"})
	one, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, map[string]string{"src/c.txt": "c\n"})
	two, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	paths := func(es []Entry) []string {
		var ps []string
		for _, e := range es {
			ps = append(ps, e.Path)
		}
		return ps
	}
	for i, c := range []struct {
		tree Tree
		want []string
	}{{one, []string{"a.txt", "src/b.txt"}}, {one, []string{"a.txt", "src/b.txt"}}, {two, []string{"a.txt", "src/b.txt", "src/c.txt"}}, {one, []string{"a.txt", "src/b.txt"}}} {
		files, err := r.Files(ctx, c.tree)
		if err != nil {
			t.Fatal(err)
		}
		if got := paths(files); !slices.Equal(got, c.want) {
			t.Fatalf("Files #%d = %v, want %v", i, got, c.want)
		}
		files[0] = Entry{Path: "scribbled by a caller"}
	}
	for _, tree := range []Tree{one, two} {
		if changes, err := r.Changes(ctx, tree, tree); err != nil || len(changes) != 0 {
			t.Errorf("Changes(%s, itself) = %v, %v", tree, changes, err)
		}
	}
	if changes, err := r.Changes(ctx, one, two); err != nil || len(changes) != 1 || changes[0].Path != "src/c.txt" {
		t.Errorf("Changes(one, two) = %+v, %v", changes, err)
	}
}

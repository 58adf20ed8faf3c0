package gitrepo

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A project in a subdirectory sees only its own paths in Changes, also
// between trees that differ outside it: snapshots taken before and after
// the user committed elsewhere in the repository (a snapshot carries HEAD's
// version of what is not the project's), and the trees of two commits of
// the whole repository.
func TestChangesOfASubdirectoryProjectStayInside(t *testing.T) {
	t.Parallel()
	top := newRepo(t)
	write(t, top, map[string]string{"top.txt": "top", "other/c.txt": "c", "proj/a.txt": "a"})
	first := commitAll(t, top)
	r := openRepo(t, filepath.Join(top, "proj"))
	before, err := r.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// The user commits outside the project while a run changes a.txt.
	write(t, top, map[string]string{"top.txt": "top changed", "other/new": "n", "proj/a.txt": "a changed"})
	gitT(t, top, "add", "top.txt", "other/new")
	gitT(t, top, "commit", "-q", "-m", "outside the project")
	after, err := r.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	second := commitAll(t, top)

	tests := []struct {
		name     string
		from, to Tree
	}{
		{"snapshots across a commit outside the project", before, after},
		{"the trees of two commits", Tree(strings.TrimSpace(gitT(t, top, "rev-parse", first+"^{tree}"))),
			Tree(strings.TrimSpace(gitT(t, top, "rev-parse", second+"^{tree}")))},
	}
	for _, tt := range tests {
		changes, err := r.Changes(t.Context(), tt.from, tt.to)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		var got []string
		for _, c := range changes {
			got = append(got, c.Path+" "+c.Kind.String())
		}
		if want := []string{"a.txt modified"}; !slices.Equal(got, want) {
			t.Errorf("%s: changes %q, want %q", tt.name, got, want)
		}
	}
}

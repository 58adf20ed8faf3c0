package gitrepo

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadBundleHeader(t *testing.T) {
	a, b := strings.Repeat("a", 40), strings.Repeat("b", 40)
	long := strings.Repeat("c", 64)
	for _, c := range []struct {
		name, header string
		prereqs      []string
		tips         []BundleTip
		err          string
	}{
		{name: "v2", header: "# v2 git bundle\n-" + a + " the base's subject\n" + b + " HEAD\n\n",
			prereqs: []string{a}, tips: []BundleTip{{b, "HEAD"}}},
		{name: "v2, no prerequisite, two tips", header: "# v2 git bundle\n" + a + " refs/heads/x\n" + b + " refs/heads/y\n\n",
			tips: []BundleTip{{a, "refs/heads/x"}, {b, "refs/heads/y"}}},
		{name: "v3 sha1", header: "# v3 git bundle\n@object-format=sha1\n" + b + " HEAD\n\n", tips: []BundleTip{{b, "HEAD"}}},
		{name: "v3 sha256", header: "# v3 git bundle\n@object-format=sha256\n-" + long + "\n" + long + " HEAD\n\n",
			prereqs: []string{long}, tips: []BundleTip{{long, "HEAD"}}},
		{name: "a sha256 id in a sha1 bundle", header: "# v2 git bundle\n" + long + " HEAD\n\n", err: "is not an object id and a name"},
		{name: "a sha1 id in a sha256 bundle", header: "# v3 git bundle\n@object-format=sha256\n" + b + " HEAD\n\n", err: "is not an object id and a name"},
		{name: "a partial bundle", header: "# v3 git bundle\n@filter=blob:none\n" + b + " HEAD\n\n", err: `capability "@filter=blob:none"`},
		{name: "v1", header: "# v1 git bundle\n" + b + " HEAD\n\n", err: `starts with "# v1 git bundle"`},
		{name: "a tip without a name", header: "# v2 git bundle\n" + b + "\n\n", err: "is not an object id and a name"},
		{name: "a tip with an empty name", header: "# v2 git bundle\n" + b + " \n\n", err: "is not an object id and a name"},
		{name: "a tip that is no id", header: "# v2 git bundle\n" + strings.Repeat("g", 40) + " HEAD\n\n", err: "is not an object id and a name"},
		{name: "a sha256 prerequisite in a sha1 bundle", header: "# v2 git bundle\n-" + long + "\n" + b + " HEAD\n\n", err: "does not start with an object id"},
		{name: "a prerequisite that is no id", header: "# v2 git bundle\n-" + a[:39] + " x\n" + b + " HEAD\n\n", err: "does not start with an object id"},
		{name: "no tip", header: "# v2 git bundle\n-" + a + "\n\n", err: "names no tip"},
		{name: "cut short", header: "# v2 git bundle\n" + b + " HEAD\n", err: "truncated"},
		{name: "cut short in its capabilities", header: "# v3 git bundle\n@object-format=sha1", err: "truncated"},
		{name: "empty", header: "", err: "not a git bundle"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ReadBundle(strings.NewReader(c.header+"PACK"), int64(len(c.header))+4)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "not a git bundle") {
					t.Fatalf("got %v, want not a git bundle: %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !equalStrings(got.Prerequisites, c.prereqs) || len(got.Tips) != len(c.tips) {
				t.Fatalf("got %v %v, want %v %v", got.Prerequisites, got.Tips, c.prereqs, c.tips)
			}
			for i := range c.tips {
				if got.Tips[i] != c.tips[i] {
					t.Errorf("tip %d: %v, want %v", i, got.Tips[i], c.tips[i])
				}
			}
			if rest, _ := io.ReadAll(got.pack); string(rest) != "PACK" {
				t.Errorf("the pack reads %q, want PACK", rest)
			}
		})
	}
}

func equalStrings(a, b []string) bool {
	return strings.Join(a, ",") == strings.Join(b, ",")
}

func TestReadBundleBound(t *testing.T) {
	header := "# v2 git bundle\n" + strings.Repeat("b", 40) + " HEAD\n\n"
	bundle := header + "PACK-and-more"
	if _, err := ReadBundle(strings.NewReader(bundle), 0); err == nil || !strings.Contains(err.Error(), "give a positive bound") {
		t.Errorf("a bound of 0: %v, want give a positive bound", err)
	}
	// A header past the bound.
	if _, err := ReadBundle(strings.NewReader(bundle), int64(len(header))-1); !errors.Is(err, ErrBundleTooLarge) {
		t.Errorf("a header past the bound: %v, want ErrBundleTooLarge", err)
	}
	// The whole bundle exactly at the bound reads to its end.
	b, err := ReadBundle(strings.NewReader(bundle), int64(len(bundle)))
	if err != nil {
		t.Fatal(err)
	}
	if rest, err := io.ReadAll(b.pack); err != nil || string(rest) != "PACK-and-more" {
		t.Errorf("at the bound: %q %v, want the whole pack", rest, err)
	}
	// One byte more is past it.
	b, err = ReadBundle(strings.NewReader(bundle), int64(len(bundle))-1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(b.pack); !errors.Is(err, ErrBundleTooLarge) || !b.read.over {
		t.Errorf("one byte past the bound: %v, want ErrBundleTooLarge", err)
	}
}

func TestWriteBundleAndUnbundle(t *testing.T) {
	ctx := t.Context()
	src := newRepo(t)
	write(t, src, map[string]string{"a.txt": "a\n", "bin": "exec:#!/bin/sh\n", "l": "link:a.txt"})
	base := commitAll(t, src)
	write(t, src, map[string]string{"a.txt": "a, later\n", "new.txt": "new\n"})
	tip := commitAll(t, src)
	r := openRepo(t, src)
	tree := Tree(strings.TrimSpace(gitT(t, src, "rev-parse", tip+"^{tree}")))

	if err := r.WriteBundle(ctx, io.Discard, "", string(tree)); err == nil || !strings.Contains(err.Error(), "is not a commit") {
		t.Errorf("a bundle of a tree: %v, want is not a commit", err)
	}
	if err := r.WriteBundle(ctx, io.Discard, "main", tip); err == nil || !strings.Contains(err.Error(), "not an object id") {
		t.Errorf("a base that is a name: %v, want not an object id", err)
	}

	var whole, since bytes.Buffer
	if err := r.WriteBundle(ctx, &whole, "", base); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteBundle(ctx, &since, base, tip); err != nil {
		t.Fatal(err)
	}
	// git itself reads them.
	for name, data := range map[string][]byte{"whole": whole.Bytes(), "since": since.Bytes()} {
		file := filepath.Join(t.TempDir(), name+".bundle")
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		gitT(t, src, "bundle", "verify", "-q", file)
	}

	dst := filepath.Join(t.TempDir(), "dst")
	b, err := ReadBundle(bytes.NewReader(whole.Bytes()), int64(whole.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if err := CloneBundle(ctx, b, dst, "lane", base); err != nil {
		t.Fatal(err)
	}
	d := openRepo(t, dst)
	b, err = ReadBundle(bytes.NewReader(since.Bytes()), int64(since.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Prerequisites) != 1 || b.Prerequisites[0] != base || len(b.Tips) != 1 || b.Tips[0].Commit != tip {
		t.Fatalf("header %v %v, want %s then %s", b.Prerequisites, b.Tips, base, tip)
	}
	if err := d.Unbundle(ctx, b); err != nil {
		t.Fatal(err)
	}
	if got := Tree(strings.TrimSpace(gitT(t, dst, "rev-parse", tip+"^{tree}"))); got != tree {
		t.Errorf("tip's tree %s, want %s", got, tree)
	}
	if refs := gitT(t, dst, "for-each-ref", "--format=%(refname)"); refs != "refs/heads/lane\n" {
		t.Errorf("refs after Unbundle: %q, want the clone's branch alone", refs)
	}

	// A repository without the prerequisite cannot take it.
	other := newRepo(t)
	write(t, other, map[string]string{"x": "x\n"})
	commitAll(t, other)
	b, err = ReadBundle(bytes.NewReader(since.Bytes()), int64(since.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if err := openRepo(t, other).Unbundle(ctx, b); err == nil || !strings.Contains(err.Error(), "needs commit "+base) {
		t.Errorf("without the prerequisite: %v, want needs commit %s", err, base)
	}
}

func TestDeleteRef(t *testing.T) {
	ctx := t.Context()
	dir := newRepo(t)
	write(t, dir, map[string]string{"a": "a\n"})
	first := commitAll(t, dir)
	second := commitAll(t, dir)
	r := openRepo(t, dir)
	gitT(t, dir, "update-ref", "refs/x/held", second)
	if err := r.DeleteRef(ctx, "x/held", second); err == nil || !strings.Contains(err.Error(), "full ref name") {
		t.Errorf("a short name: %v", err)
	}
	if err := r.DeleteRef(ctx, "refs/x/held", ""); err == nil || !strings.Contains(err.Error(), "not an object id") {
		t.Errorf("from no value: %v, want not an object id", err)
	}
	if err := r.DeleteRef(ctx, "refs/x/held", first); !errors.Is(err, ErrRefChanged) {
		t.Errorf("from another value: %v, want ErrRefChanged", err)
	}
	if got := strings.TrimSpace(gitT(t, dir, "rev-parse", "refs/x/held")); got != second {
		t.Errorf("the ref holds %s after a refused delete, want %s", got, second)
	}
	if err := r.DeleteRef(ctx, "refs/x/held", second); err != nil {
		t.Fatal(err)
	}
	if refs := gitT(t, dir, "for-each-ref", "refs/x/"); refs != "" {
		t.Errorf("after delete: %q", refs)
	}
	if err := r.DeleteRef(ctx, "refs/x/held", second); !errors.Is(err, ErrRefChanged) {
		t.Errorf("a ref that is gone: %v, want ErrRefChanged", err)
	}
}

func TestObjectSizesAndUnowned(t *testing.T) {
	ctx := t.Context()
	dir := newRepo(t)
	write(t, dir, map[string]string{"proj/a.txt": "12345", "proj/l": "link:a.txt", "proj/keep/x": "x", "other.txt": "o"})
	base := commitAll(t, dir)
	write(t, dir, map[string]string{"proj/a.txt": "123", "proj/keep/x": "y", "other.txt": "p", "proj/b.txt": "b"})
	tip := commitAll(t, dir)
	r := openRepo(t, filepath.Join(dir, "proj"), "keep")
	ids := []string{blobID("12345"), strings.TrimSpace(gitT(t, dir, "rev-parse", base+":proj/l"))}
	sizes, err := r.ObjectSizes(ctx, ids)
	if err != nil || len(sizes) != 2 || sizes[0] != 5 || sizes[1] != int64(len("a.txt")) {
		t.Errorf("sizes %v %v, want [5 5]", sizes, err)
	}
	if sizes, err := r.ObjectSizes(ctx, nil); err != nil || sizes != nil {
		t.Errorf("no ids: %v %v", sizes, err)
	}
	if _, err := r.ObjectSizes(ctx, []string{strings.Repeat("0", 40)}); err == nil {
		t.Error("a missing object: no error")
	}
	if _, err := r.ObjectSizes(ctx, []string{"HEAD"}); err == nil {
		t.Error("a name: no error")
	}
	from := Tree(strings.TrimSpace(gitT(t, dir, "rev-parse", base+"^{tree}")))
	to := Tree(strings.TrimSpace(gitT(t, dir, "rev-parse", tip+"^{tree}")))
	got, err := r.Unowned(ctx, from, to)
	if err != nil || strings.Join(got, ",") != "other.txt,proj/keep/x" {
		t.Errorf("unowned %v %v, want other.txt and proj/keep/x", got, err)
	}
}

// TestWriteBundleIsThin: a bundle since a base carries what changed, as
// deltas against the base's objects, not the changed files whole.
func TestWriteBundleIsThin(t *testing.T) {
	dir := newRepo(t)
	var big strings.Builder
	for i := range 4000 {
		fmt.Fprintf(&big, "line %d %x\n", i, uint64(i)*0x9e3779b97f4a7c15)
	}
	write(t, dir, map[string]string{"big.txt": big.String()})
	base := commitAll(t, dir)
	write(t, dir, map[string]string{"big.txt": big.String() + "one more line\n"})
	tip := commitAll(t, dir)
	var out bytes.Buffer
	if err := openRepo(t, dir).WriteBundle(t.Context(), &out, base, tip); err != nil {
		t.Fatal(err)
	}
	if out.Len() > 2048 {
		t.Errorf("a one-line change to a file of %d bytes makes a bundle of %d bytes, want a thin one", big.Len(), out.Len())
	}
}

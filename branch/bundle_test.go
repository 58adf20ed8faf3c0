package branch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxgraphd/ctxgraphd/gates"
	"github.com/ctxgraphd/ctxgraphd/internal/gitrepo"
)

// resultLimit is the bound on a result bundle in these tests.
const resultLimit = 1 << 22

// remoteLane is a daemon's project and a worker's lane of it, made from a
// bundle of base as a worker makes it: no path of the project's.
type remoteLane struct {
	*fixture
	base   string // the lane's base, with a parent (baseParent) of its own
	parent string
	clone  string // the worker's clone
	worker *gitrepo.Repo
}

func newRemoteLane(t *testing.T) *remoteLane {
	t.Helper()
	f := newFixture(t)
	f.write(map[string]string{"README.md": "project\n", "src/a.go": "package a\n", "src/old.go": "package a // old\n", "doc/guide.md": "guide\n"})
	parent := f.commitAll("first")
	f.write(map[string]string{"src/b.go": "package a // b\n"})
	base := f.commitAll("second")
	f.git("update-ref", TestedRef("X"), base)

	var out bytes.Buffer
	if err := WriteBase(t.Context(), f.repo, &out, base); err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(t.TempDir(), "lane")
	if err := CloneBase(t.Context(), &out, int64(out.Len()), clone, "F-001", base); err != nil {
		t.Fatal(err)
	}
	worker, err := gitrepo.Open(t.Context(), gitrepo.Options{Dir: clone, Index: filepath.Join(t.TempDir(), "worker.index")})
	if err != nil {
		t.Fatal(err)
	}
	return &remoteLane{fixture: f, base: base, parent: parent, clone: clone, worker: worker}
}

// work runs git in the worker's clone, with an identity of its own.
func (l *remoteLane) work(args ...string) string {
	l.t.Helper()
	return gitOut(l.t, l.clone, nil, args...)
}

func gitOut(t testing.TB, dir string, stdin []byte, args ...string) string {
	t.Helper()
	return strings.TrimSpace(string(gitRaw(t, dir, stdin, args...)))
}

// gitRaw is gitOut's output as git wrote it: a pack's last bytes may be
// white space.
func gitRaw(t testing.TB, dir string, stdin []byte, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Worker", "GIT_AUTHOR_EMAIL=worker@example.com",
		"GIT_COMMITTER_NAME=Worker", "GIT_COMMITTER_EMAIL=worker@example.com")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %q in %s: %v: %s", args, dir, err, stderr.String())
	}
	return out
}

// commit writes files (content "" removes the file) in the worker's clone
// and commits them all.
func (l *remoteLane) commit(msg string, files map[string]string) string {
	l.t.Helper()
	for p, content := range files {
		name := filepath.Join(l.clone, filepath.FromSlash(p))
		if content == "" {
			if err := os.Remove(name); err != nil {
				l.t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			l.t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			l.t.Fatal(err)
		}
	}
	l.work("add", "-A")
	l.work("commit", "-q", "--allow-empty", "-m", msg)
	return l.work("rev-parse", "HEAD")
}

// result is the bundle an honest worker sends: base..tip.
func (l *remoteLane) result(tip string) []byte {
	l.t.Helper()
	var out bytes.Buffer
	if err := WriteResult(l.t.Context(), l.worker, &out, l.base, tip); err != nil {
		l.t.Fatal(err)
	}
	return out.Bytes()
}

// gitBundle is a bundle git bundle writes in the worker's clone of revs.
func (l *remoteLane) gitBundle(revs ...string) []byte {
	l.t.Helper()
	file := filepath.Join(l.t.TempDir(), "forged.bundle")
	l.work(append([]string{"bundle", "create", "-q", file}, revs...)...)
	data, err := os.ReadFile(file)
	if err != nil {
		l.t.Fatal(err)
	}
	return data
}

// forged is a bundle of the header lines given, then a pack of revs (as
// pack-objects --revs takes them) from the worker's clone.
func (l *remoteLane) forged(header []string, revs ...string) []byte {
	l.t.Helper()
	pack := gitRaw(l.t, l.clone, []byte(strings.Join(revs, "\n")+"\n"), "pack-objects", "--stdout", "--revs", "--thin", "-q")
	return append([]byte("# v2 git bundle\n"+strings.Join(header, "\n")+"\n\n"), pack...)
}

// rules are a coder's, as a local lane's change set meets them.
func (l *remoteLane) rules(run string) Result {
	return Result{
		Run: run, Base: l.base, MaxBytes: resultLimit,
		Actor: gates.Actor{Role: gates.Coder, Feature: "F-001", Run: run},
		State: gates.State{ProjectDir: l.dir, MaxFileSize: 1 << 20},
	}
}

// refs lists every ref of the project with what it holds, HEAD's target
// and whether a FETCH_HEAD was written.
func (l *remoteLane) refs() string {
	l.t.Helper()
	_, err := os.Stat(filepath.Join(l.dir, ".git", "FETCH_HEAD"))
	return l.git("for-each-ref", "--format=%(refname) %(objectname)") + "\nHEAD " + l.git("symbolic-ref", "HEAD") + fmt.Sprintf("\nFETCH_HEAD %v", err == nil)
}

func TestImportResultTakesAnHonestResultByteForByte(t *testing.T) {
	l := newRemoteLane(t)
	binary := string([]byte{0, 1, 2, 0xff, 0xfe, '\r', '\n', 0, 'x'})
	l.commit("one", map[string]string{"src/a.go": "package a\n\nfunc A() {}\n", "src/new.go": "package a // new\n", "img/logo.bin": binary})
	l.work("mv", "src/old.go", "src/renamed.go")
	l.commit("rename", nil)
	l.commit("delete", map[string]string{"doc/guide.md": ""})
	if err := os.WriteFile(filepath.Join(l.clone, "run.sh"), []byte("#!/bin/sh\necho hi\r\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../etc/passwd", filepath.Join(l.clone, "src", "link")); err != nil {
		t.Fatal(err)
	}
	tip := l.commit("executable and a link", nil)
	before := l.refs()

	got, err := ImportResult(t.Context(), l.repo, bytes.NewReader(l.result(tip)), l.rules("run-1"))
	if err != nil {
		t.Fatalf("an honest result: %v", err)
	}
	if got.Commit != tip || got.Ref != QuarantineRef("run-1") || len(got.Warnings) != 0 {
		t.Errorf("imported %+v, want commit %s under %s, no warnings", got, tip, QuarantineRef("run-1"))
	}
	if want := gitrepo.Tree(l.work("rev-parse", tip+"^{tree}")); got.Tree != want {
		t.Errorf("tree %s, want the worker's %s", got.Tree, want)
	}
	if held := l.git("rev-parse", QuarantineRef("run-1")); held != tip {
		t.Errorf("%s holds %s, want %s", QuarantineRef("run-1"), held, tip)
	}
	if after := l.refs(); strings.Replace(after, QuarantineRef("run-1")+" "+tip+"\n", "", 1) != before {
		t.Errorf("refs moved besides the quarantine ref:\nbefore %s\nafter  %s", before, after)
	}
	// Every file as the worker has it: bytes, executable bit, link.
	out := filepath.Join(t.TempDir(), "export")
	if err := l.repo.Export(t.Context(), got.Tree, out); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"README.md", "src/a.go", "src/new.go", "src/renamed.go", "src/b.go", "img/logo.bin", "run.sh"} {
		want, _ := os.ReadFile(filepath.Join(l.clone, p))
		have, err := os.ReadFile(filepath.Join(out, p))
		if err != nil || !bytes.Equal(have, want) {
			t.Errorf("%s: %q (%v), want the worker's %q", p, have, err, want)
		}
	}
	for _, p := range []string{"doc/guide.md", "src/old.go"} {
		if _, err := os.Lstat(filepath.Join(out, p)); !os.IsNotExist(err) {
			t.Errorf("%s: deleted by the worker, still there (%v)", p, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(out, "run.sh")); err != nil || fi.Mode()&0o100 == 0 {
		t.Errorf("run.sh lost its executable bit: %v %v", fi, err)
	}
	if target, err := os.Readlink(filepath.Join(out, "src", "link")); err != nil || target != "../../etc/passwd" {
		t.Errorf("src/link: %q %v, want the worker's link", target, err)
	}

	again := bytes.NewReader(l.result(tip))
	if _, err := ImportResult(t.Context(), l.repo, again, l.rules("run-1")); err == nil || errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "already holds") {
		t.Errorf("a second import for a run whose result is still held: %v, want an error that is not a refusal", err)
	}
	if again.Len() != int(again.Size()) {
		t.Errorf("a second import read %d bytes of its bundle, want none", int(again.Size())-again.Len())
	}
	if err := ReleaseResult(t.Context(), l.repo, "run-1", l.base); !errors.Is(err, gitrepo.ErrRefChanged) {
		t.Errorf("release at another commit: %v, want ErrRefChanged", err)
	}
	if err := ReleaseResult(t.Context(), l.repo, "run-1", tip); err != nil {
		t.Fatal(err)
	}
	if after := l.refs(); after != before {
		t.Errorf("refs after the release:\n%s\nwant\n%s", after, before)
	}
}

// TestImportResultRefusesForgedResults: each forged result is refused,
// naming the run and what is at fault, and leaves every ref of the
// project as it was, the quarantine ref included (none).
func TestImportResultRefusesForgedResults(t *testing.T) {
	l := newRemoteLane(t)
	ctx := t.Context()
	tip := l.commit("work", map[string]string{"src/a.go": "package a // worked\n"})
	honest := l.result(tip)

	// Histories beside the lane's, made in the worker's clone.
	l.work("checkout", "-q", "--orphan", "unrelated")
	l.commit("unrelated", map[string]string{"other.txt": "other\n"})
	l.work("checkout", "-q", "-b", "sibling", l.parent)
	sibling := l.commit("sibling", map[string]string{"src/a.go": "package a // sibling\n"})
	l.work("checkout", "-q", "-b", "second", tip)
	second := l.commit("second tip", map[string]string{"src/c.go": "package a // c\n"})
	l.work("checkout", "-q", LaneBranch("F-001"))

	// A tip made by hand, with a tree git's checks refuse.
	blob := gitOut(t, l.clone, []byte("[core]\n\tbare = false\n"), "hash-object", "-w", "--stdin")
	dotGit := gitOut(t, l.clone, []byte("100644 blob "+blob+"\tconfig\n"), "mktree")
	baseTree := l.work("rev-parse", l.base+"^{tree}")
	entries := strings.Split(l.work("ls-tree", baseTree), "\n")
	evilTree := gitOut(t, l.clone, []byte(strings.Join(append(entries, "040000 tree "+dotGit+"\t.GIT"), "\n")+"\n"), "mktree")
	evil := l.work("commit-tree", evilTree, "-p", l.base, "-m", "a .GIT/config")

	// A gitlink: a nested repository recorded as a commit id.
	l.work("update-index", "--add", "--cacheinfo", "160000,"+l.base+",vendor/nested")
	l.work("commit", "-q", "-m", "nested")
	gitlink := l.work("rev-parse", "HEAD")
	l.work("reset", "-q", "--hard", tip)

	l.work("checkout", "-q", "-b", "big", tip)
	big := l.commit("big", map[string]string{"data/big.bin": strings.Repeat("x", 1<<20+1)})
	l.work("checkout", "-q", "-b", "progress", tip)
	progressTip := l.commit("progress", map[string]string{".claude/progress/feature-list.json": "{}\n"})
	l.work("checkout", "-q", "-b", "rules", tip)
	rulesTip := l.commit("rules", map[string]string{".gitattributes": "* -text\n"})
	l.work("checkout", "-q", LaneBranch("F-001"))

	l.work("tag", "-a", "-m", "a tag", "v1", tip)
	tag := l.work("rev-parse", "v1")
	truncated := honest[:len(honest)/2]
	corrupt := bytes.Clone(honest)
	corrupt[len(corrupt)-30] ^= 0xff

	for _, c := range []struct {
		name   string
		bundle []byte
		limit  int64
		path   string // the path the refusal names
		why    string // a part of its reason
	}{
		{name: "unrelated history", bundle: l.gitBundle("unrelated"), why: "does not descend from the lane's base"},
		{name: "a sibling of the base", bundle: l.bundleOf(l.base, sibling), why: "does not descend from the lane's base"},
		{name: "the base's parent", bundle: l.bundleOf(l.base, l.parent), why: "does not descend from the lane's base"},
		{name: "two tips", bundle: l.gitBundle("^"+l.base, LaneBranch("F-001"), "second"), why: "2 tips"},
		{name: "another prerequisite the daemon has", bundle: l.forged([]string{"-" + l.base, "-" + l.parent, tip + " HEAD"}, tip, "^"+l.base), why: "needs commit " + l.parent},
		{name: "a prerequisite only the worker has", bundle: l.gitBundle(LaneBranch("F-001") + "..second"), why: "needs commit " + tip},
		{name: "a pack, not a bundle", bundle: []byte("PACK\x00\x00\x00\x02"), why: "starts with \"PACK"},
		{name: "an empty file", bundle: nil, why: "not a git bundle"},
		{name: "a header cut short", bundle: honest[:20], why: "truncated"},
		{name: "a partial bundle", bundle: []byte("# v3 git bundle\n@filter=blob:none\n" + tip + " HEAD\n\n"), why: "capability"},
		{name: "truncated", bundle: truncated, why: "reading the bundle's objects"},
		{name: "corrupt", bundle: corrupt, why: "reading the bundle's objects"},
		{name: "a tip the bundle does not carry", bundle: l.forged([]string{"-" + l.base, second + " HEAD"}, tip, "^"+l.base), why: "a commit of neither its pack nor the repository"},
		{name: "a blob the bundle does not carry", bundle: l.forgedObjects([]string{"-" + l.base, big + " HEAD"}, big, l.work("rev-parse", big+"^{tree}"), l.work("rev-parse", big+":data")), why: "did not receive expected object"},
		{name: "a tag for a tip", bundle: l.forged([]string{"-" + l.base, tag + " HEAD"}, tag, "^"+l.base), why: "a commit of neither its pack nor the repository"},
		{name: "oversized", bundle: honest, limit: int64(len(honest)) - 1, why: "bundle too large"},
		{name: "a .GIT/config", bundle: l.bundleOf(l.base, evil), why: "reading the bundle's objects"},
		{name: "a nested repository (gitlink)", bundle: l.bundleOf(l.base, gitlink), path: "vendor/nested", why: "a nested repository"},
		{name: "a file past sandbox.max_file_mb", bundle: l.bundleOf(l.base, big), path: "data/big.bin", why: "past sandbox.max_file_mb"},
		{name: "the daemon's progress directory", bundle: l.bundleOf(l.base, progressTip), path: ".claude/progress/feature-list.json", why: "not the project's to change"},
		{name: "a path only a person changes", bundle: l.bundleOf(l.base, rulesTip), path: ".gitattributes", why: "only a person changes it"},
		{name: "a tip and refs/heads/main", bundle: l.forged([]string{"-" + l.base, tip + " refs/heads/main", tip + " " + TestedRef("X")}, tip, "^"+l.base), why: "2 tips"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := l.refs()
			res := l.rules("run-forged")
			if c.limit > 0 {
				res.MaxBytes = c.limit
			}
			_, err := ImportResult(ctx, l.repo, bytes.NewReader(c.bundle), res)
			var refused *RefusedError
			if !errors.As(err, &refused) || !errors.Is(err, ErrRefused) {
				t.Fatalf("got %v, want a refusal", err)
			}
			if refused.Run != "run-forged" || refused.Path != c.path || !strings.Contains(refused.Why, c.why) {
				t.Errorf("refused run %q path %q: %q; want run-forged, path %q, a reason with %q", refused.Run, refused.Path, refused.Why, c.path, c.why)
			}
			if !strings.Contains(err.Error(), "run-forged") || !strings.Contains(err.Error(), c.path) {
				t.Errorf("the error %q names neither the run nor %q", err, c.path)
			}
			if after := l.refs(); after != before {
				t.Errorf("refs moved:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// bundleOf is the bundle of base..tip as this package writes it, whatever
// tip's history: the header says what an honest one says.
func (l *remoteLane) bundleOf(base, tip string) []byte {
	l.t.Helper()
	var out bytes.Buffer
	if err := l.worker.WriteBundle(l.t.Context(), &out, base, tip); err != nil {
		l.t.Fatal(err)
	}
	return out.Bytes()
}

// TestImportResultMovesNoRefTheBundleNames: the one tip's name, whatever
// it is, moves nothing; a bundle of exactly the bound is taken.
func TestImportResultMovesNoRefTheBundleNames(t *testing.T) {
	for _, name := range []string{"refs/heads/main", TestedRef("X"), "HEAD", QuarantineRef("run-other")} {
		t.Run(name, func(t *testing.T) {
			l := newRemoteLane(t)
			tip := l.commit("work", map[string]string{"src/a.go": "package a // worked\n"})
			bundle := l.forged([]string{"-" + l.base, tip + " " + name}, tip, "^"+l.base)
			before := l.refs()
			res := l.rules("run-1")
			res.MaxBytes = int64(len(bundle))
			got, err := ImportResult(t.Context(), l.repo, bytes.NewReader(bundle), res)
			if err != nil || got.Commit != tip {
				t.Fatalf("got %+v, %v; want %s imported", got, err, tip)
			}
			if after := l.refs(); strings.Replace(after, QuarantineRef("run-1")+" "+tip+"\n", "", 1) != before {
				t.Errorf("refs moved besides the quarantine ref:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// TestImportResultWarnsWhereAGateWarns: a gate in warn mode lets the
// change through, as it does a local lane's, and says so.
func TestImportResultWarnsWhereAGateWarns(t *testing.T) {
	l := newRemoteLane(t)
	tip := l.commit("rules", map[string]string{".gitattributes": "* -text\n", "src/a.go": "package a // worked\n"})
	res := l.rules("run-1")
	res.Modes = gates.Modes{gates.RoleWritePolicy: gates.Warn}
	got, err := ImportResult(t.Context(), l.repo, bytes.NewReader(l.result(tip)), res)
	if err != nil {
		t.Fatalf("a result a gate in warn mode finds against: %v, want it imported", err)
	}
	if len(got.Warnings) != 1 || got.Warnings[0].Path != ".gitattributes" || got.Warnings[0].Code != "git_rules" {
		t.Errorf("warnings %+v, want git_rules on .gitattributes", got.Warnings)
	}
}

// TestImportResultRefusesARequestTheDaemonGotWrong: a result request the
// daemon itself got wrong is an error, not a worker's refusal, and reads
// nothing.
func TestImportResultRefusesARequestTheDaemonGotWrong(t *testing.T) {
	l := newRemoteLane(t)
	tip := l.commit("work", map[string]string{"src/a.go": "package a // worked\n"})
	bundle := l.result(tip)
	for _, c := range []struct {
		name string
		edit func(*Result)
		want string
	}{
		{"no run", func(r *Result) { r.Run = "" }, "is not a run's id"},
		{"a run with a slash", func(r *Result) { r.Run = "a/b" }, "is not a run's id"},
		{"a run with ..", func(r *Result) { r.Run = "a..b" }, "is not a run's id"},
		{"a run starting with a dot", func(r *Result) { r.Run = ".a" }, "is not a run's id"},
		{"a run ending in .lock", func(r *Result) { r.Run = "a.lock" }, "is not a run's id"},
		{"a run with a space", func(r *Result) { r.Run = "a b" }, "is not a run's id"},
		{"no bound", func(r *Result) { r.MaxBytes = 0 }, "MaxBytes is 0"},
		{"no base", func(r *Result) { r.Base = "" }, "is not a commit id of the project"},
		{"a base by name", func(r *Result) { r.Base = "main" }, "is not a commit id of the project"},
		{"a base the project lacks", func(r *Result) { r.Base = strings.Repeat("0", 40) }, "is not a commit id of the project"},
		{"a person's", func(r *Result) { r.Actor.Role = "" }, "no actor role"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := l.rules("run-1")
			c.edit(&res)
			rd := bytes.NewReader(bundle)
			_, err := ImportResult(t.Context(), l.repo, rd, res)
			if err == nil || errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error with %q that is no refusal", err, c.want)
			}
			if rd.Len() != len(bundle) {
				t.Errorf("read %d bytes of the bundle, want none", len(bundle)-rd.Len())
			}
		})
	}
	// Every letter and digit, the first and last of each range included.
	for _, run := range []string{"az-AZ_09.x", "run-1.b_Y8"} {
		res := l.rules(run)
		got, err := ImportResult(t.Context(), l.repo, bytes.NewReader(bundle), res)
		if err != nil {
			t.Errorf("run %s: %v", run, err)
			continue
		}
		if err := ReleaseResult(t.Context(), l.repo, run, got.Commit); err != nil {
			t.Error(err)
		}
	}
}

// TestImportResultStoppedIsNoRefusal: an import its context stopped
// midway is the daemon's failure, not the worker's.
func TestImportResultStoppedIsNoRefusal(t *testing.T) {
	l := newRemoteLane(t)
	tip := l.commit("work", map[string]string{"src/a.go": "package a // worked\n"})
	bundle := l.result(tip)
	header := bytes.Index(bundle, []byte("\n\n")) + 2
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	rd := io.MultiReader(bytes.NewReader(bundle[:header]), &cancelling{cancel: cancel, rest: bytes.NewReader(bundle[header:])})
	_, err := ImportResult(ctx, l.repo, rd, l.rules("run-1"))
	if err == nil || errors.Is(err, ErrRefused) {
		t.Errorf("got %v, want an error that is no refusal", err)
	}
	if held := l.git("for-each-ref", QuarantineRef("run-1")); held != "" {
		t.Errorf("quarantine ref left: %s", held)
	}
}

// cancelling cancels its context when its pack is first read: the
// import is stopped midway, its pack half read, as a daemon's shutdown
// stops it.
type cancelling struct {
	cancel func()
	rest   io.Reader
}

func (c *cancelling) Read(p []byte) (int, error) {
	c.cancel()
	n, _ := c.rest.Read(p[:min(len(p), 64)])
	return n, context.Canceled
}

// TestCloneBaseIsTheBaseByteForByte: the worker's clone holds the base's
// files as its tree has them, whatever .gitattributes asks of a checkout,
// on the lane's branch, with no attributes of the daemon's left behind.
func TestCloneBaseIsTheBaseByteForByte(t *testing.T) {
	f := newFixture(t)
	files := map[string]string{".gitattributes": "* text eol=crlf\n*.txt ident\n", "a.txt": "$Id$\nline\n", "lf.md": "one\ntwo\n"}
	f.write(files)
	f.git("add", "-A")
	f.git("-c", "core.autocrlf=false", "commit", "-q", "-m", "base")
	base := f.git("rev-parse", "HEAD")
	var out bytes.Buffer
	if err := WriteBase(t.Context(), f.repo, &out, base); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "lane")
	if err := CloneBase(t.Context(), bytes.NewReader(out.Bytes()), int64(out.Len()), dir, "F-001", base); err != nil {
		t.Fatal(err)
	}
	for p, want := range files {
		if blob, err := f.repo.Blob(t.Context(), f.git("rev-parse", base+":"+p)); err != nil || string(blob) != want {
			t.Fatalf("%s is committed as %q (%v), want %q", p, blob, err, want)
		}
		have, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil || string(have) != want {
			t.Errorf("%s: %q (%v), want the commit's %q", p, have, err, want)
		}
	}
	if head := gitOut(t, dir, nil, "symbolic-ref", "HEAD"); head != "refs/heads/"+LaneBranch("F-001") {
		t.Errorf("HEAD on %s, want %s", head, LaneBranch("F-001"))
	}
	if at := gitOut(t, dir, nil, "rev-parse", "HEAD"); at != base {
		t.Errorf("HEAD at %s, want %s", at, base)
	}
	if _, err := os.Stat(filepath.Join(dir, ".git", "info", "attributes")); !os.IsNotExist(err) {
		t.Errorf("info/attributes left in the clone: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".git", "hooks")); !os.IsNotExist(err) {
		t.Errorf("a template's hooks in the clone: %v", err)
	}
	if status := gitOut(t, dir, nil, "status", "--porcelain"); status != "" {
		t.Errorf("the clone differs from its HEAD: %s", status)
	}
}

// TestCloneBaseRefusesAnotherBundle: a clone is made only from a bundle
// of the whole history of the commit asked for, within its bound, in a
// new directory; a refused clone leaves no directory behind.
func TestCloneBaseRefusesAnotherBundle(t *testing.T) {
	l := newRemoteLane(t)
	tip := l.commit("work", map[string]string{"src/a.go": "package a // worked\n"})
	var whole bytes.Buffer
	if err := WriteBase(t.Context(), l.repo, &whole, l.base); err != nil {
		t.Fatal(err)
	}
	full := filepath.Join(t.TempDir(), "full")
	if err := os.MkdirAll(full, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(full, "here"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		bundle []byte
		limit  int64
		commit string
		dir    string
		want   string
	}{
		{"another commit", whole.Bytes(), 0, l.parent, "", "want " + l.parent},
		{"a bundle needing a commit", l.result(tip), 0, tip, "", "needs commits it does not carry"},
		{"past its bound", whole.Bytes(), int64(whole.Len()) - 1, l.base, "", "bundle too large"},
		{"a directory in use", whole.Bytes(), 0, l.base, full, "not empty"},
		{"a bad branch", whole.Bytes(), 0, l.base, "", "is not a branch name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := c.dir
			if dir == "" {
				dir = filepath.Join(t.TempDir(), "lane")
			}
			limit := c.limit
			if limit == 0 {
				limit = int64(len(c.bundle))
			}
			feature := "F-001"
			if c.name == "a bad branch" {
				feature = "bad..name"
			}
			err := CloneBase(t.Context(), bytes.NewReader(c.bundle), limit, dir, feature, c.commit)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error with %q", err, c.want)
			}
			if c.dir == "" {
				if _, err := os.Stat(dir); !os.IsNotExist(err) {
					t.Errorf("%s left behind: %v", dir, err)
				}
			} else if _, err := os.Stat(filepath.Join(dir, "here")); err != nil {
				t.Errorf("a directory in use was touched: %v", err)
			}
		})
	}
}

// forgedObjects is a bundle of the header lines given, then a pack of
// exactly the objects named.
func (l *remoteLane) forgedObjects(header []string, objects ...string) []byte {
	l.t.Helper()
	pack := gitRaw(l.t, l.clone, []byte(strings.Join(objects, "\n")+"\n"), "pack-objects", "--stdout", "-q")
	return append([]byte("# v2 git bundle\n"+strings.Join(header, "\n")+"\n\n"), pack...)
}

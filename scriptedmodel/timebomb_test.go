package scriptedmodel

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A time bomb's code is right until its moment and wrong from then on,
// and the wait for its fuse reads that moment off the code on the branch.
func TestTimeBomb(t *testing.T) {
	run := func(dir, script string) string {
		t.Helper()
		out, err := exec.Command("sh", "-c", script).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	dir := t.TempDir()
	for _, tt := range []struct {
		name string
		at   time.Time
		want string
	}{
		{"before its moment: right", time.Now().Add(time.Hour), workingLine("F-001")},
		{"after its moment: wrong", time.Now().Add(-time.Second), WentOff("F-001")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, "bomb.sh")
			if err := os.WriteFile(p, []byte(timeBombSource("F-001", tt.at.Unix())), 0o644); err != nil {
				t.Fatal(err)
			}
			if got := run(dir, "sh "+p); got != tt.want {
				t.Errorf("the bomb says %q, want %q", got, tt.want)
			}
		})
	}
	// The wait reads the moment from the branch: one just past ends at once.
	repo := t.TempDir()
	src := "src/F-001.sh"
	os.MkdirAll(filepath.Join(repo, "src"), 0o755)
	os.WriteFile(filepath.Join(repo, src), []byte(timeBombSource("F-001", time.Now().Add(-time.Second).Unix())), 0o644)
	run(repo, "cd "+repo+" && git init -q && git add -A && git -c user.name=t -c user.email=t@t commit -qm bomb")
	if got := run(repo, "cd "+repo+" && "+awaitFuse("F-001", src)); got != FuseBurnt("F-001") {
		t.Errorf("the wait for the fuse said %q, want %q", got, FuseBurnt("F-001"))
	}
}

package graph

import (
	"path"
	"slices"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/store"
)

// maxPerGlob bounds the refusals a precedent takes about the files of one
// glob of the feature's scope: the newest few say what goes wrong there.
const maxPerGlob = 3

// sameFiles are the refusals about the files of subj's scope on other
// features, newest first: an agent about to change a file is told what
// was refused about it before, whoever was refused. The store files a
// trace under its path's directories, so each glob is one walk of the
// directory it starts from; a glob over the whole project says nothing
// about particular files and is passed over.
func sameFiles(src Traces, subj Subject) ([]control.Trace, error) {
	var out []control.Trace
	for _, glob := range subj.Scope {
		base, _ := doublestar.SplitPattern(path.Clean(glob))
		under := base + "/"
		if !doublestar.ValidatePattern(glob) || base == "." || base == "" || base == "/" {
			continue
		}
		if base == path.Clean(glob) {
			under = base // a file, not a pattern
		}
		// Read a few more than are taken: some are the feature's own, or
		// not matched by the glob's pattern part.
		ts, err := src.Traces(store.TraceFilter{Type: control.TraceViolation, PathUnder: under, Limit: 4 * maxPerGlob})
		if err != nil {
			return out, err
		}
		taken := 0
		for _, t := range slices.Backward(ts) {
			if taken == maxPerGlob {
				break
			}
			if t.Context.Feature == subj.Feature && subj.Feature != "" || t.Source == control.SourceAgent {
				continue
			}
			if ok, _ := doublestar.Match(path.Clean(glob), t.Path); !ok {
				continue
			}
			out = append(out, t)
			taken++
		}
	}
	return out, nil
}

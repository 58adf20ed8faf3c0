package progress

import (
	"path"
	"strings"
)

// ScopePattern is a pattern of a feature's scope as the scope is read
// wherever it is (the scope gate, the lanes' file ownership): written with
// forward slashes, cleaned, with no leading "./". A list written on
// Windows, or by hand, means the same paths as one that is not.
func ScopePattern(glob string) string {
	return strings.TrimPrefix(path.Clean(strings.ReplaceAll(glob, "\\", "/")), "./")
}

package control_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraphd/ctxgraphd/control"
)

// An APIError says its message to people; without one its code; without
// either, the HTTP status it stands for.
func TestAPIErrorText(t *testing.T) {
	tests := []struct {
		err  control.APIError
		want string
	}{
		{control.APIError{HTTPStatus: 409, Code: "not_blocked", Message: "F-9 is pending"}, "F-9 is pending"},
		{control.APIError{HTTPStatus: 409, Code: "not_blocked"}, "not_blocked"},
		{control.APIError{HTTPStatus: 503}, "the daemon answered 503 Service Unavailable"},
		{control.APIError{}, "the daemon answered 0 "},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("%+v.Error() = %q, want %q", tt.err, got, tt.want)
		}
	}
}

// Each status the server answers without a code of its own gets the code
// of its kind; any other is internal.
func TestCodeForStatus(t *testing.T) {
	tests := map[int]string{
		http.StatusBadRequest:          control.CodeBadRequest,
		http.StatusForbidden:           control.CodeForbidden,
		http.StatusNotFound:            control.CodeNotFound,
		http.StatusMethodNotAllowed:    control.CodeMethodNotAllowed,
		http.StatusConflict:            control.CodeConflict,
		http.StatusServiceUnavailable:  control.CodeUnavailable,
		http.StatusInternalServerError: control.CodeInternal,
		http.StatusTeapot:              control.CodeInternal,
		http.StatusOK:                  control.CodeInternal,
		0:                              control.CodeInternal,
	}
	for status, want := range tests {
		if got := control.CodeForStatus(status); got != want {
			t.Errorf("CodeForStatus(%d) = %q, want %q", status, got, want)
		}
	}
}

// A token is kept only as its SHA-256; no token has no hash (nothing to
// bind a record to), not the hash of "".
func TestTokenHash(t *testing.T) {
	sum := sha256.Sum256([]byte("secret-of-run-1"))
	if got, want := control.TokenHash("secret-of-run-1"), hex.EncodeToString(sum[:]); got != want {
		t.Errorf("TokenHash = %q, want %q", got, want)
	}
	if got := control.TokenHash(""); got != "" {
		t.Errorf("TokenHash(\"\") = %q, want \"\"", got)
	}
}

// TraceQuery.Values and ParseTraceQuery are each other's inverse; a zero
// field is left out of the query, and a malformed value is a 400 that says
// what is wanted.
func TestTraceQueryRoundTrip(t *testing.T) {
	paris := time.FixedZone("CET", 3600)
	tests := []struct {
		name  string
		q     control.TraceQuery
		query string // Values().Encode()
		back  control.TraceQuery
	}{
		{name: "zero", q: control.TraceQuery{}, query: "", back: control.TraceQuery{}},
		{name: "every field",
			q:     control.TraceQuery{Type: "violation", Agent: "coding-agent", Feature: "F-001", Run: "run-7", Gate: "scope", Text: "tested & more", Level: "full", Since: time.Date(2026, 1, 2, 4, 4, 5, 0, paris), Limit: 5},
			query: "agent=coding-agent&feature=F-001&gate=scope&level=full&limit=5&q=tested+%26+more&run=run-7&since=2026-01-02T03%3A04%3A05Z&type=violation",
			back:  control.TraceQuery{Type: "violation", Agent: "coding-agent", Feature: "F-001", Run: "run-7", Gate: "scope", Text: "tested & more", Level: "full", Since: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Limit: 5}},
		{name: "a time range to the nanosecond", q: control.TraceQuery{Since: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), Until: time.Date(2026, 1, 2, 4, 0, 0, 0, time.UTC)},
			query: "since=2026-01-02T03%3A04%3A05.000000006Z&until=2026-01-02T04%3A00%3A00Z",
			back:  control.TraceQuery{Since: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), Until: time.Date(2026, 1, 2, 4, 0, 0, 0, time.UTC)}},
		{name: "a limit of one", q: control.TraceQuery{Limit: 1}, query: "limit=1", back: control.TraceQuery{Limit: 1}},
		{name: "no limit is no limit=0", q: control.TraceQuery{Limit: 0, Run: "r"}, query: "run=r", back: control.TraceQuery{Run: "r"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := tt.q.Values()
			if got := v.Encode(); got != tt.query {
				t.Errorf("Values() = %q, want %q", got, tt.query)
			}
			back, err := control.ParseTraceQuery(v)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, tt.back) || !back.Since.Equal(tt.q.Since) {
				t.Errorf("ParseTraceQuery = %+v, want %+v", back, tt.back)
			}
		})
	}
}

func TestParseTraceQuery(t *testing.T) {
	tests := []struct {
		query   string
		want    control.TraceQuery
		wantErr string // the start of the message; "" when it parses
	}{
		{query: "limit=0", want: control.TraceQuery{}},
		{query: "limit=12&type=decision", want: control.TraceQuery{Limit: 12, Type: "decision"}},
		{query: "since=2026-01-02T15:04:05%2B02:00", want: control.TraceQuery{Since: time.Date(2026, 1, 2, 15, 4, 5, 0, time.FixedZone("", 7200))}},
		{query: "limit=-1", wantErr: "limit: want a whole number >= 0"},
		{query: "limit=ten", wantErr: "limit: want a whole number >= 0"},
		{query: "since=yesterday", wantErr: "since: want an RFC 3339 time"},
		{query: "since=2026-01-02", wantErr: "since: want an RFC 3339 time"},
		{query: "until=tomorrow", wantErr: "until: want an RFC 3339 time"},
	}
	for _, tt := range tests {
		v, err := url.ParseQuery(tt.query)
		if err != nil {
			t.Fatal(err)
		}
		q, err := control.ParseTraceQuery(v)
		if tt.wantErr != "" {
			var ae *control.APIError
			if !errors.As(err, &ae) || ae.HTTPStatus != http.StatusBadRequest || ae.Code != control.CodeBadRequest || len(ae.Message) < len(tt.wantErr) || ae.Message[:len(tt.wantErr)] != tt.wantErr {
				t.Errorf("ParseTraceQuery(%s) = %v, want a 400 saying %q", tt.query, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseTraceQuery(%s): %v", tt.query, err)
			continue
		}
		if !q.Since.Equal(tt.want.Since) {
			t.Errorf("ParseTraceQuery(%s).Since = %v, want %v", tt.query, q.Since, tt.want.Since)
		}
		q.Since, tt.want.Since = time.Time{}, time.Time{}
		if !reflect.DeepEqual(q, tt.want) {
			t.Errorf("ParseTraceQuery(%s) = %+v, want %+v", tt.query, q, tt.want)
		}
	}
}

// CheckTraceType and CheckLevel take "" (any, or the route's default) and
// the contract's names, exactly: a near miss (case, spaces, a plural, a
// prefix, an extension) is refused with an error that lists the names.
func TestTraceTypesAndLevelsAreAllowListed(t *testing.T) {
	for _, tt := range []struct {
		name  string
		check func(string) error
		valid []string
	}{
		{"trace type", control.CheckTraceType, control.TraceTypes},
		{"level", control.CheckLevel, control.Levels},
	} {
		if err := tt.check(""); err != nil {
			t.Errorf("%s \"\": %v, want accepted", tt.name, err)
		}
		for _, v := range tt.valid {
			if err := tt.check(v); err != nil {
				t.Errorf("%s %q: %v, want accepted", tt.name, v, err)
			}
			for _, near := range []string{strings.ToUpper(v), strings.ToUpper(v[:1]) + v[1:], " " + v, v + " ", v + "s", v[:len(v)-1], v + "x", "x" + v, v + "," + v} {
				err := tt.check(near)
				if err == nil {
					t.Errorf("%s %q was accepted", tt.name, near)
					continue
				}
				if !strings.Contains(err.Error(), strings.Join(tt.valid, ", ")) {
					t.Errorf("%s %q: %v, want the names listed", tt.name, near, err)
				}
			}
		}
	}
}

// A command passed when it exited 0, and only then.
func TestCommandRecordPassed(t *testing.T) {
	for _, tt := range []struct {
		code int
		want bool
	}{{0, true}, {1, false}, {2, false}, {-1, false}, {127, false}, {255, false}} {
		if got := (control.CommandRecord{ExitCode: tt.code}).Passed(); got != tt.want {
			t.Errorf("exit %d: Passed = %v, want %v", tt.code, got, tt.want)
		}
	}
}

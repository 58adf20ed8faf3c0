// Package scriptedmodel is a loopback Anthropic Messages API that plays the
// three agent roles of ctxgraphd deterministically, so that the real Claude
// Code CLI can run the whole loop without a model: in the end-to-end tests
// and in `ctxgraphd demo`.
//
// The CLI is pointed at the server with ANTHROPIC_BASE_URL. Each request is
// answered from its own message history and nothing else: the command object
// of the run (agents.Command) says which role to play and for which feature,
// the tool calls and results since that command say how far the role got,
// and the scenario says how the feature's coding agent behaves on each
// attempt. Two servers given the same history give the same answer, which
// is what makes a resumed session (a retry) work like a real one.
//
// A role is a script (roles.go): a list of tool calls and a final text. The
// replay (script.go) walks the calls made since the command, checks each
// against its step, handles what a real model would (the CLI refusing a
// Write before a Read, a tool error worth quoting), and answers with the
// next step. Behaviors map attempts to the kind of work a coding agent does
// in the codingWork table; misbehaving variants are new rows and, when
// needed, new scripts. A feature's tester behavior (honest by default)
// picks the tester's script the same way.
//
// Misbehaving scripts break the gates of ctxgraphd on purpose and react to
// the structured reason of each denial as a model would. The server keeps
// every denial the model read (Denials), so that a test can check that a
// gate's reason reached the model, not only that the gate fired.
package scriptedmodel

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// maxBody bounds a request body. A long session carries its whole history
// in every request, which stays far below this.
const maxBody = 64 << 20

// Stats counts what the server has done, for tests.
type Stats struct {
	Requests     int            // HTTP requests of any kind
	Messages     int            // POST /v1/messages
	Runs         map[string]int // runs started, by role: first answers to a command object
	ToolCalls    int            // answers that call a tool
	FinalAnswers int            // answers that end a turn for a command object, or a probe's
	Unscripted   int            // Messages requests without a command object (titles, subagents)
	BadRequests  int            // requests the server could not read
	Outages      int            // requests answered with an outage's error
}

// Server is the scripted model. Its zero value is not usable; call New.
type Server struct {
	sc       Scenario
	features map[string]FeatureScript
	log      *zap.Logger
	// idPrefix keeps message and tool ids unique across servers: a session
	// resumed under another server (a restarted daemon) must not see an id
	// again, or the CLI merges the two messages.
	idPrefix string
	seq      atomic.Uint64

	mu    sync.Mutex
	stats Stats
	// denials are the refusals the model has read, in the order it first
	// read them; seen holds their keys (turn.denials).
	denials []Denial
	seen    map[string]bool
	// refusals are the sandbox's refusals the model has read (Refusals),
	// keyed in refused.
	refusals []Refusal
	refused  map[string]bool
	srv      *http.Server
	done     chan struct{}

	// told are the command objects that started runs (Told).
	told []Told

	// probe, when set, replaces the roles (NewProbe).
	probe *probe
	// outages are the API failures still to play (Scenario.Outages), the
	// first one's count going down.
	outages []Outage
}

// New returns a server that plays sc. A nil log discards the logs.
func New(sc Scenario, log *zap.Logger) *Server {
	if log == nil {
		log = zap.NewNop()
	}
	var p [4]byte
	_, _ = rand.Read(p[:]) // never fails (crypto/rand documents it)
	s := &Server{
		sc:       sc,
		features: make(map[string]FeatureScript, len(sc.Features)),
		log:      log,
		idPrefix: hex.EncodeToString(p[:]),
		stats:    Stats{Runs: map[string]int{}},
		seen:     map[string]bool{},
		refused:  map[string]bool{},
		outages:  slices.Clone(sc.Outages),
	}
	for _, f := range sc.Features {
		s.features[f.ID] = f
		if !f.Behavior.known() {
			log.Warn("unknown behavior, the feature is coded as pass", zap.String("feature", f.ID), zap.String("behavior", string(f.Behavior)))
		}
	}
	return s
}

// Start listens on a free loopback port and serves in a goroutine. It
// returns the base URL for ANTHROPIC_BASE_URL.
func (s *Server) Start() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return "", errors.New("scriptedmodel: server already started")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("scriptedmodel: listen on loopback: %w", err)
	}
	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          zap.NewStdLog(s.log),
	}
	s.done = make(chan struct{})
	go func(srv *http.Server, done chan struct{}) {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("serving stopped", zap.Error(err))
		}
	}(s.srv, s.done)
	url := "http://" + ln.Addr().String()
	s.log.Debug("scripted model listening", zap.String("url", url), zap.String("scenario", s.sc.Name))
	return url, nil
}

// Close stops the listener, waits for requests in flight and for the serving
// goroutine. Closing a server that was never started does nothing.
func (s *Server) Close() error {
	s.mu.Lock()
	srv, done := s.srv, s.done
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	// Answers take microseconds, or the scenario's turn latency; the
	// timeout only guards against a client that keeps a request open,
	// which Close then cuts.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(ctx)
	if err != nil {
		err = srv.Close()
	}
	<-done
	return err
}

// Stats returns a copy of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Runs = maps.Clone(s.stats.Runs)
	return st
}

// Denials returns the refusals of ctxgraphd's gates that the model has read
// (the structured reason, gates.Denial, in a tool error or in Stop hook
// feedback), each once, in the order it first read them.
func (s *Server) Denials() []Denial {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.denials)
}

// Refusals returns the sandbox's refusals the model has read (tool errors
// in a program's own words, no gate's reason), each once, in the order it
// first read them.
func (s *Server) Refusals() []Refusal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.refusals)
}

// record keeps the denials and refusals a request shows that the model
// had not read before.
func (s *Server) record(t *turn) {
	if !t.found {
		return
	}
	keys, ds := t.denials()
	rkeys, rs := t.refusals()
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.started {
		s.told = append(s.told, t.told())
	}
	for i, k := range rkeys {
		if !s.refused[k] {
			s.refused[k] = true
			s.refusals = append(s.refusals, rs[i])
		}
	}
	for i, k := range keys {
		if s.seen[k] {
			continue
		}
		s.seen[k] = true
		s.denials = append(s.denials, ds[i])
		s.log.Debug("denial read", zap.Stringer("denial", ds[i]))
	}
}

func (s *Server) count(f func(*Stats)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.stats)
}

// ServeHTTP answers the Messages API, its token counting, and, with an
// empty object, whatever else the CLI probes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.count(func(st *Stats) { st.Requests++ })
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
		s.messages(w, r)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages/count_tokens":
		body, err := readBody(w, r)
		if err != nil {
			s.badRequest(w, err)
			return
		}
		writeJSON(w, map[string]int{"input_tokens": tokens(body)})
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		writeJSON(w, struct{}{})
	default:
		s.log.Debug("no such endpoint", zap.String("method", r.Method), zap.String("path", r.URL.Path))
		writeError(w, http.StatusNotFound, "not_found_error", fmt.Sprintf("the scripted model has no %s %s", r.Method, r.URL.Path))
	}
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	s.count(func(st *Stats) { st.Messages++ })
	body, err := readBody(w, r)
	if err != nil {
		s.badRequest(w, err)
		return
	}
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		s.badRequest(w, fmt.Errorf("invalid JSON body: %w", err))
		return
	}
	t := readTurn(&req)
	t.session = r.Header.Get("X-Claude-Code-Session-Id")
	if o, ok := s.outage(&t); ok {
		if o.Stall {
			s.log.Debug("outage: stalling", zap.String("agent", t.cmd.Agent), zap.String("feature", t.cmd.Context.FeatureID))
			<-r.Context().Done() // Close cuts it, after its grace
			return
		}
		if o.RetryAfter > 0 {
			w.Header().Set("retry-after", strconv.Itoa(o.RetryAfter))
		}
		s.log.Debug("outage", zap.Int("status", o.Status), zap.String("agent", t.cmd.Agent), zap.String("feature", t.cmd.Context.FeatureID))
		writeError(w, o.Status, o.errorType(), fmt.Sprintf("the scripted model plays an outage (HTTP %d)", o.Status))
		return
	}
	s.record(&t)
	rep := s.answer(&t)
	log := s.log.With(zap.Int("messages", len(req.Messages)), zap.Bool("stream", req.Stream))
	if t.found {
		log = log.With(zap.String("agent", t.cmd.Agent), zap.String("feature", t.cmd.Context.FeatureID),
			zap.Int("attempt", t.cmd.attempt()), zap.Int("tool_calls", len(t.exchanges)), zap.String("cwd", t.cwd))
	}
	s.count(func(st *Stats) {
		switch {
		case !t.found && s.probe == nil:
			st.Unscripted++
		case rep.call != nil:
			st.ToolCalls++
		default:
			st.FinalAnswers++
		}
		if t.found && t.started {
			st.Runs[t.cmd.Agent]++
		}
	})

	if !s.think(r.Context()) {
		log.Debug("the client hung up while the model thought", zap.Error(r.Context().Err()))
		return
	}
	msg := s.message(req.Model, rep, tokens(body))
	if rep.call != nil {
		log.Debug("tool call", zap.String("tool", rep.call.Name), zap.Any("input", rep.call.Input), zap.String("id", msg.ID))
	} else {
		log.Debug("final answer", zap.String("text", rep.text), zap.String("id", msg.ID))
	}
	w.Header().Set("request-id", "req_"+msg.ID[len("msg_"):])
	if req.Stream {
		writeSSE(w, msg)
		return
	}
	writeJSON(w, msg)
}

// think waits the scenario's turn latency, as a model takes time to
// answer. It reports false when ctx ends first: the client is gone, and
// nothing is to be sent.
func (s *Server) think(ctx context.Context) bool {
	if s.sc.TurnLatencyMS <= 0 {
		return true
	}
	t := time.NewTimer(time.Duration(s.sc.TurnLatencyMS) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// outage takes the next request of a run for the current outage, if any.
// Only a run's requests count: the CLI's side requests (titles) would
// make the count depend on its version.
func (s *Server) outage(t *turn) (Outage, bool) {
	if !t.found {
		return Outage{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.outages) == 0 {
		return Outage{}, false
	}
	o := s.outages[0]
	if s.outages[0].Count--; s.outages[0].Count == 0 {
		s.outages = s.outages[1:]
	}
	s.stats.Outages++
	return o, true
}

// answer is the model's move for a request.
func (s *Server) answer(t *turn) reply {
	if s.probe != nil {
		return s.probe.answer(t)
	}
	if !t.found {
		// Title generation, subagents, anything that is not a run of
		// ctxgraphd: a short answer ends it.
		return reply{text: "OK."}
	}
	role, ok := roles[t.cmd.Agent]
	if !ok {
		return say("I have no script for the agent %q.", t.cmd.Agent)
	}
	return t.play(role(s, t))
}

// apiMessage is a Messages API response.
type apiMessage struct {
	ID           string     `json:"id"`
	Type         string     `json:"type"`
	Role         string     `json:"role"`
	Model        string     `json:"model"`
	Content      []apiBlock `json:"content"`
	StopReason   string     `json:"stop_reason"`
	StopSequence *string    `json:"stop_sequence"`
	Usage        usage      `json:"usage"`
}

type apiBlock struct {
	Type  string         `json:"type"`
	Text  *string        `json:"text,omitempty"`
	ID    string         `json:"id,omitempty"`
	Name  string         `json:"name,omitempty"`
	Input map[string]any `json:"input,omitempty"`
}

type usage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

// message builds the response to send, with ids no other response has.
func (s *Server) message(model string, rep reply, inTokens int) apiMessage {
	n := s.seq.Add(1)
	m := apiMessage{
		ID:    fmt.Sprintf("msg_%s%06d", s.idPrefix, n),
		Type:  "message",
		Role:  "assistant",
		Model: model,
		Usage: usage{InputTokens: inTokens},
	}
	if m.Model == "" {
		m.Model = "scripted-model"
	}
	if rep.call != nil {
		in := rep.call.Input
		if in == nil {
			in = map[string]any{}
		}
		m.Content = []apiBlock{{Type: "tool_use", ID: fmt.Sprintf("toolu_%s%06d", s.idPrefix, n), Name: rep.call.Name, Input: in}}
		m.StopReason = "tool_use"
		b, _ := json.Marshal(in)
		m.Usage.OutputTokens = tokens(b)
	} else {
		text := rep.text
		m.Content = []apiBlock{{Type: "text", Text: &text}}
		m.StopReason = "end_turn"
		m.Usage.OutputTokens = tokens([]byte(text))
	}
	return m
}

// writeSSE streams a message as the API does: message_start, then start,
// one delta and stop per content block, then message_delta with the stop
// reason, and message_stop. The CLI wants one event:/data: pair per SSE
// message.
func writeSSE(w http.ResponseWriter, m apiMessage) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	bw := bufio.NewWriter(w)
	event := func(v map[string]any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(bw, "event: %s\ndata: %s\n\n", v["type"], b)
	}
	event(map[string]any{"type": "message_start", "message": map[string]any{
		"id": m.ID, "type": m.Type, "role": m.Role, "model": m.Model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": usage{InputTokens: m.Usage.InputTokens, OutputTokens: 1},
	}})
	for i, b := range m.Content {
		switch b.Type {
		case "text":
			event(map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			event(map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": *b.Text}})
		case "tool_use":
			in, _ := json.Marshal(b.Input)
			event(map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": map[string]any{}}})
			event(map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(in)}})
		}
		event(map[string]any{"type": "content_block_stop", "index": i})
	}
	event(map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": m.StopReason, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": m.Usage.OutputTokens}})
	event(map[string]any{"type": "message_stop"})
	_ = bw.Flush() // a client that hung up is not the server's problem
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers in the API's error shape, which the CLI reports as is.
func writeError(w http.ResponseWriter, status int, kind, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"type":  "error",
		"error": map[string]string{"type": kind, "message": msg},
	})
}

func (s *Server) badRequest(w http.ResponseWriter, err error) {
	s.count(func(st *Stats) { st.BadRequests++ })
	s.log.Debug("bad request", zap.Error(err))
	writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
}

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	var body io.Reader = http.MaxBytesReader(w, r.Body, maxBody)
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(body)
		if err != nil {
			return nil, fmt.Errorf("gzip body: %w", err)
		}
		defer zr.Close()
		body = io.LimitReader(zr, maxBody)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	return b, nil
}

// tokens is a deterministic stand-in for a token count: about four bytes a
// token, never zero, so cost accounting has something to add up.
func tokens(b []byte) int {
	return len(b)/4 + 1
}

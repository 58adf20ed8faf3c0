// Package fleet runs lanes on workers over NATS JetStream, both sides of
// it: on the daemon, the NATS server embedded in it (server.go), the
// subjects, streams and object stores of a project's fleet and what each
// worker may do with them (subjects.go, the one place), the workers'
// credentials, issued, listed and revoked by the daemon (workers.go,
// control.go), and the Executor, the runner that ships a lane's run to a
// worker and lands what comes back (executor.go); on a worker, the loop
// of `ctxgraphd worker` (worker.go) and the relay of its runs' hooks
// (relay.go). The messages between the two are in protocol.go, the
// dependencies that cross beside the bundles in deps.go.
//
// The server has one client listener: 127.0.0.1 on a port of the system's
// choosing unless the daemon configures one (nats.listen), and with TLS
// when configured (nats.tls.*), which an address other machines reach
// requires. It has no cluster, gateway or leaf node listener, and a
// monitoring one only when asked (nats.monitor). The daemon itself
// connects in process, not over the listener.
//
// Every connection over the listener is a worker with a user of its own
// (an NKey), allowed only its own subjects: nothing else connects.
package fleet

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/ctxgraphd/ctxgraphd/config"
)

// Config is what the daemon gives its fleet's server.
type Config struct {
	// Dir holds the fleet's state: the JetStream store and the workers'
	// credentials. It is a directory of the project's state dir, absolute.
	Dir string
	// Project names the project's subjects, streams and buckets
	// (Subjects); several projects can share one NATS server.
	Project string
	// Listen is the client listener's host:port (nats.listen); "":
	// 127.0.0.1 on a port of the system's choosing.
	Listen string
	// TLSCert and TLSKey are PEM files (nats.tls.cert, nats.tls.key):
	// when set, the listener speaks TLS only. A Listen that is not
	// loopback needs them.
	TLSCert, TLSKey string
	// Monitor is the server's monitoring listener, host:port (nats.monitor;
	// port 0: one of the system's choosing); "": none. It serves the
	// server's figures (/jsz: the work queue's depth, for a scaler of
	// workers) without authentication, and never a message.
	Monitor string
	// ResultsMaxBytes bounds each worker's results bucket, the one store
	// a worker fills; 0: DefaultResultsMaxBytes.
	ResultsMaxBytes int64
	// Log receives the server's notices, warnings and errors; nil drops them.
	Log *zap.Logger
}

// Bounds of what a worker can fill: its results bucket holds a run's
// result bundle and dependencies a slot, for as long as the daemon takes
// to read them, which it does at once; more is a worker's doing.
const (
	DefaultResultsMaxBytes = 4 * DefaultMaxBundle
	// resultsMaxAge: an object no daemon read in this long is dropped.
	resultsMaxAge = 24 * time.Hour
)

// Server is the NATS server embedded in the daemon, with JetStream, and
// the daemon's own connection to it.
type Server struct {
	subjects Subjects
	dir      string
	ns       *server.Server
	nc       *nats.Conn
	js       jetstream.JetStream

	// opts are the options the server started with, but its users: every
	// change of the workers reloads the server with these and the users
	// of the moment.
	opts      server.Options
	daemonKey string // the daemon's own user, a public NKey
	// daemonSign signs the daemon's connections' challenges with its key.
	daemonSign func([]byte) ([]byte, error)

	mu sync.Mutex // serialises changes of the workers and their reloads
	// revoked are told each worker revoked, once the server has cut it
	// off (OnRevoke).
	revoked []func(worker string)
	// resultsMax bounds each results bucket (Config.ResultsMaxBytes).
	resultsMax int64
	// activity is the attached executor's (Attach); nil: none.
	activity func(worker string) Activity
	// names are the workers' names (keepNames), read without s.mu.
	names atomic.Pointer[map[string]bool]
}

// OnRevoke has f told the name of each worker RevokeWorker revokes, once
// its connections are closed and before its results bucket goes: the
// executor gives up the attempts it holds.
func (s *Server) OnRevoke(f func(worker string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revoked = append(s.revoked, f)
}

// Attach makes ex the executor of the server's workers: told of each
// revocation, asked what it saw of each worker for the control API, and
// told which workers are connected.
func (s *Server) Attach(ex *Executor) {
	s.OnRevoke(ex.Revoked)
	s.mu.Lock()
	s.activity = ex.Activity
	s.mu.Unlock()
	ex.mu.Lock()
	ex.connected, ex.known = s.ConnectedWorkers, s.IsWorker
	ex.mu.Unlock()
}

// IsWorker reports whether name is a worker's with credentials now.
func (s *Server) IsWorker(name string) bool {
	names := s.names.Load()
	return names != nil && (*names)[name]
}

// ConnectedWorkers are the names of the workers connected now.
func (s *Server) ConnectedWorkers() []string {
	ws, err := s.Workers()
	if err != nil {
		return nil
	}
	on := s.connected()
	var out []string
	for _, w := range ws {
		if on[w.PublicKey] {
			out = append(out, w.Name)
		}
	}
	return out
}

// connected are the public keys of the workers connected now.
func (s *Server) connected() map[string]bool {
	out := map[string]bool{}
	cz, err := s.ns.Connz(&server.ConnzOptions{Username: true, Limit: 1 << 16})
	if err != nil {
		return out
	}
	for _, c := range cz.Conns {
		out[c.AuthorizedUser] = true
	}
	return out
}

// maxPayload is the largest message the server takes.
const maxPayload = 8 << 20

// startTimeout bounds how long the server may take to accept connections.
const startTimeout = 10 * time.Second

// Start starts the fleet's server, with JetStream storing in cfg.Dir, and
// makes the work queue, its consumer and the object stores the workers
// use. Shutdown stops it.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	subjects, err := NewSubjects(cfg.Project)
	if err != nil {
		return nil, err
	}
	if !filepath.IsAbs(cfg.Dir) {
		return nil, fmt.Errorf("fleet: the state directory %q is not absolute", cfg.Dir)
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return nil, errors.New("fleet: TLS needs both a certificate and its key (nats.tls.cert, nats.tls.key)")
	}
	if !config.ListenIsLoopback(cfg.Listen) && cfg.TLSCert == "" {
		return nil, fmt.Errorf("fleet: listen address %q is reachable from other machines and needs TLS: set nats.tls.cert and nats.tls.key, or listen on 127.0.0.1", cfg.Listen)
	}
	host, port := "127.0.0.1", server.RANDOM_PORT
	if cfg.Listen != "" {
		var err error
		if host, port, err = listenAddr("listen", cfg.Listen); err != nil {
			return nil, err
		}
	}
	for _, d := range []string{storeDir(cfg.Dir), workersDir(cfg.Dir)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("fleet: %w", err)
		}
	}

	// The daemon's user lives as long as this server: a new key at every
	// start, never on disk.
	daemon, err := nkeys.CreateUser()
	if err != nil {
		return nil, fmt.Errorf("fleet: the daemon's key: %w", err)
	}
	daemonKey, err := daemon.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("fleet: the daemon's key: %w", err)
	}
	s := &Server{subjects: subjects, dir: cfg.Dir, daemonKey: daemonKey, daemonSign: daemon.Sign, resultsMax: cmp.Or(cfg.ResultsMaxBytes, DefaultResultsMaxBytes)}
	s.opts = server.Options{
		ServerName: "ctxgraphd-" + cfg.Project,
		Host:       host,
		Port:       port,
		// 0 is "no monitoring port" (the server's own default, said
		// here since a monitoring port is a second listener), unless
		// Monitor asks for one (below).
		HTTPPort:  0,
		NoSigs:    true, // the daemon owns the signals
		NoLog:     cfg.Log == nil,
		JetStream: true,
		StoreDir:  storeDir(cfg.Dir),
		// A hook's question crosses whole (a Write of a large file is
		// in its payload): as large as the daemon's socket takes (4 MiB,
		// server.ReadJSON) with room for the call around it. The
		// server's default, 1 MiB, would refuse a Write the socket takes.
		MaxPayload: maxPayload,
	}
	if cfg.Monitor != "" {
		if s.opts.HTTPHost, s.opts.HTTPPort, err = listenAddr("monitor", cfg.Monitor); err != nil {
			return nil, err
		}
	}
	if cfg.TLSCert != "" {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: cfg.TLSCert, KeyFile: cfg.TLSKey, MinVersion: tls.VersionTLS12})
		if err != nil {
			return nil, fmt.Errorf("fleet: TLS (nats.tls.cert %s, nats.tls.key %s): %w", cfg.TLSCert, cfg.TLSKey, err)
		}
		s.opts.TLS, s.opts.TLSConfig = true, tc
	}
	opts, err := s.options()
	if err != nil {
		return nil, err
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	if cfg.Log != nil {
		ns.SetLoggerV2(newZapLogger(cfg.Log.Named("nats")), false, false, false)
	}
	ns.Start()
	s.ns = ns
	if !ns.ReadyForConnections(startTimeout) {
		s.Shutdown()
		return nil, fmt.Errorf("fleet: the NATS server did not accept connections within %s (is %s:%d free?)", startTimeout, host, port)
	}
	s.nc, err = s.connectAsDaemon()
	if err != nil {
		s.Shutdown()
		return nil, fmt.Errorf("fleet: the daemon's connection: %w", err)
	}
	if s.js, err = jetstream.New(s.nc); err != nil {
		s.Shutdown()
		return nil, fmt.Errorf("fleet: %w", err)
	}
	if err := s.provision(ctx); err != nil {
		s.Shutdown()
		return nil, err
	}
	return s, nil
}

// listenAddr reads a listener's host:port (what names it in errors) as
// the server takes it: an empty host is every interface, as net.Listen
// reads it (the server would read it as its default, 0.0.0.0, the same),
// and port 0 one of the system's choosing.
func listenAddr(what, addr string) (host string, port int, err error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("fleet: %s address %q: want host:port: %w", what, addr, err)
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("fleet: %s address %q: want a port number from 0 to 65535", what, addr)
	}
	host, port = h, int(n)
	if host == "" {
		host = "0.0.0.0"
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	return host, port, nil
}

// connectAsDaemon opens a connection of the daemon's own user, in process.
func (s *Server) connectAsDaemon() (*nats.Conn, error) {
	return nats.Connect("", nats.InProcessServer(s.ns), nats.Name("ctxgraphd daemon"),
		nats.Nkey(s.daemonKey, s.daemonSign), nats.MaxReconnects(-1))
}

func storeDir(dir string) string   { return filepath.Join(dir, "jetstream") }
func workersDir(dir string) string { return filepath.Join(dir, "workers") }

// laneAckWait is how long a pulled lane stays a worker's without a word
// from it before JetStream gives it to another worker.
const laneAckWait = time.Minute

// provision makes (or keeps, on a restart) the work queue, its consumer,
// the base bundles' bucket and each worker's results bucket.
func (s *Server) provision(ctx context.Context) error {
	// Bounded, whatever is published there: a worker can have the
	// server publish on any subject (a JetStream answer goes where its
	// asker says), the work queue's too.
	_, err := s.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:       s.subjects.LanesStream(),
		Subjects:   []string{s.subjects.Lanes()},
		Retention:  jetstream.WorkQueuePolicy,
		Storage:    jetstream.FileStorage,
		MaxMsgs:    lanesMaxMsgs,
		MaxBytes:   lanesMaxBytes,
		MaxMsgSize: lanesMaxMsgSize,
		Discard:    jetstream.DiscardNew,
	})
	if err != nil {
		return fmt.Errorf("fleet: the work queue %s: %w", s.subjects.LanesStream(), err)
	}
	if err := s.lanesConsumer(ctx); err != nil {
		return err
	}
	if err := s.bucket(ctx, s.subjects.BaseBucket()); err != nil {
		return err
	}
	names, err := s.workerNames()
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := s.resultsBucket(ctx, name); err != nil {
			return err
		}
	}
	return nil
}

// Bounds of the work queue and of a worker's pulls on it. A Job is a few
// hundred bytes and a night has lanes by the dozen; a pull asks for one
// Job at a time, for no longer than a worker's fetch waits.
const (
	lanesMaxMsgs    = 10_000
	lanesMaxBytes   = 64 << 20
	lanesMaxMsgSize = 64 << 10
	pullsMaxWaiting = 256
	pullMaxExpires  = time.Minute
)

// lanesConsumer makes the work queue's consumer, or brings the one there
// is to its bounds: one Job a pull, pulls of a minute at most, a bounded
// number waiting, so that no worker's pulls outlive it long or crowd the
// others' out.
func (s *Server) lanesConsumer(ctx context.Context) error {
	_, err := s.js.CreateOrUpdateConsumer(ctx, s.subjects.LanesStream(), jetstream.ConsumerConfig{
		Durable:           s.subjects.LanesConsumer(),
		AckPolicy:         jetstream.AckExplicitPolicy,
		AckWait:           laneAckWait,
		MaxDeliver:        -1,
		MaxWaiting:        pullsMaxWaiting,
		MaxRequestBatch:   1,
		MaxRequestExpires: pullMaxExpires,
	})
	if err != nil {
		return fmt.Errorf("fleet: the work queue's consumer: %w", err)
	}
	return nil
}

// bucket makes an object store, or keeps the one there is.
func (s *Server) bucket(ctx context.Context, name string) error {
	return s.objectStore(ctx, jetstream.ObjectStoreConfig{Bucket: name, Storage: jetstream.FileStorage})
}

// resultsBucket makes worker's results bucket, or brings the one there is
// to its bounds: the one store a worker fills, and so bounded in size and
// age, whatever the worker puts there.
func (s *Server) resultsBucket(ctx context.Context, worker string) error {
	return s.objectStore(ctx, jetstream.ObjectStoreConfig{Bucket: s.subjects.ResultsBucket(worker), Storage: jetstream.FileStorage,
		MaxBytes: s.resultsMax, TTL: resultsMaxAge})
}

func (s *Server) objectStore(ctx context.Context, cfg jetstream.ObjectStoreConfig) error {
	if _, err := s.js.CreateOrUpdateObjectStore(ctx, cfg); err != nil {
		return fmt.Errorf("fleet: object store %s: %w", cfg.Bucket, err)
	}
	return nil
}

// options are the server's options with the users of the moment: the
// daemon, allowed everything in the fleet's account, and each worker
// whose credentials are in the workers directory, alone in an account of
// its own and allowed its own things there (accountsConfig,
// workerPermissions).
func (s *Server) options() (*server.Options, error) {
	workers, err := s.workers()
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(workers))
	for _, w := range workers {
		names = append(names, w.Name)
	}
	conf, err := s.subjects.accountsConfig(names)
	if err != nil {
		return nil, fmt.Errorf("fleet: the workers' accounts: %w", err)
	}
	var parsed server.Options
	if err := parsed.ProcessConfigString(string(conf)); err != nil {
		return nil, fmt.Errorf("fleet: the workers' accounts: %w", err)
	}
	account := make(map[string]*server.Account, len(parsed.Accounts))
	for _, a := range parsed.Accounts {
		account[a.Name] = a
	}
	opts := s.opts
	opts.Accounts = parsed.Accounts
	opts.Nkeys = []*server.NkeyUser{{Nkey: s.daemonKey, Account: account[fleetAccount]}}
	known := make(map[string]bool, len(workers))
	for _, w := range workers {
		opts.Nkeys = append(opts.Nkeys, &server.NkeyUser{Nkey: w.PublicKey, Account: account[workerAccount(w.Name)],
			Permissions: s.subjects.workerPermissions(w.Name)})
		known[w.Name] = true
	}
	// The users of the moment are the workers IsWorker knows.
	s.names.Store(&known)
	return &opts, nil
}

// reload gives the running server the users of the moment. The server
// closes the connections of a user that is gone at once.
func (s *Server) reload() error {
	opts, err := s.options()
	if err != nil {
		return err
	}
	// The server sets up the imports of the accounts it has; one it
	// makes on a reload it leaves without (nats-server's
	// configureAccounts subscribes a new account's service imports at
	// start only), and the worker would find no JetStream and none of its
	// subjects. So a worker's account is the server's before the reload
	// that configures it.
	for _, a := range opts.Accounts {
		if _, err := s.ns.LookupAccount(a.Name); err != nil {
			if _, err := s.ns.RegisterAccount(a.Name); err != nil {
				return fmt.Errorf("fleet: the account of %s: %w", a.Name, err)
			}
		}
	}
	if err := s.ns.ReloadOptions(opts); err != nil {
		return fmt.Errorf("fleet: reloading the NATS server's users: %w", err)
	}
	return nil
}

// Subjects returns the names of the fleet's subjects, streams and buckets.
func (s *Server) Subjects() Subjects { return s.subjects }

// ClientURL is the URL of the listener: nats:// or, with TLS, tls://.
// Listening on every interface, its host is 0.0.0.0: workers on other
// machines use the machine's name, which the certificate names.
func (s *Server) ClientURL() string { return s.ns.ClientURL() }

// MonitorAddr is the monitoring listener's address, nil without one.
func (s *Server) MonitorAddr() net.Addr {
	if a := s.ns.MonitorAddr(); a != nil { // a nil *net.TCPAddr is no nil net.Addr
		return a
	}
	return nil
}

// Conn is the daemon's own connection, in process and allowed everything.
// It stays the server's: Shutdown closes it.
func (s *Server) Conn() *nats.Conn { return s.nc }

// Shutdown closes the daemon's connection and stops the server, waiting
// until it has.
func (s *Server) Shutdown() {
	if s.nc != nil {
		s.nc.Close()
	}
	if s.ns != nil {
		s.ns.Shutdown()
		s.ns.WaitForShutdown()
	}
}

// zapLogger is the server's log in the daemon's. Fatalf logs an error
// and does not exit: ending the process is the daemon's decision. It is
// rate-limited: the server logs a line for each permissions violation or
// stray acknowledgement, which a worker sends at will, and the daemon's
// log is no worker's to fill. What it drops it counts, and says so at
// its next line.
type zapLogger struct {
	l       *zap.SugaredLogger
	lim     *rate.Limiter
	dropped *atomic.Int64
}

// The NATS server's lines the daemon's log takes: a burst, then a few a
// second.
const (
	natsLogBurst = 32
	natsLogEvery = 250 * time.Millisecond
)

func newZapLogger(l *zap.Logger) zapLogger {
	return zapLogger{l: l.Sugar(), lim: rate.NewLimiter(rate.Every(natsLogEvery), natsLogBurst), dropped: new(atomic.Int64)}
}

func (z zapLogger) log(f func(string, ...any), format string, v ...any) {
	if !z.lim.Allow() {
		z.dropped.Add(1)
		return
	}
	if n := z.dropped.Swap(0); n > 0 {
		z.l.Warnf("%d lines of the NATS server's were not logged: more than %d at once, or %s apart", n, natsLogBurst, natsLogEvery)
	}
	f(format, v...)
}

func (z zapLogger) Noticef(format string, v ...any) { z.log(z.l.Infof, format, v...) }
func (z zapLogger) Warnf(format string, v ...any)   { z.log(z.l.Warnf, format, v...) }
func (z zapLogger) Fatalf(format string, v ...any)  { z.log(z.l.Errorf, format, v...) }
func (z zapLogger) Errorf(format string, v ...any)  { z.log(z.l.Errorf, format, v...) }
func (z zapLogger) Debugf(format string, v ...any)  { z.log(z.l.Debugf, format, v...) }
func (z zapLogger) Tracef(format string, v ...any)  { z.log(z.l.Debugf, format, v...) }

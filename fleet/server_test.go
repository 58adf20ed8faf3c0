package fleet

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
)

// TestMain fails a passing run that leaves goroutines behind. nats.go's
// goroutines (a JetStream publisher's among them) end on the CLOSED event
// of their connection, which is delivered asynchronously: on a loaded
// machine they may take longer to run than one goleak.Find waits (about
// two seconds; a run of the package once failed so), so the check is
// repeated for up to leakWait; a goroutine that leaked stays past it.
//
// One goroutine is nats.go's own leak and is ignored by name: each
// ObjectStore.Put makes a JetStream context of its own, whose first
// asynchronous publish starts resetPendingAcksOnReconnect, and clears the
// context's status channel (cleanupReplySub) when the put ends. When the
// goroutine is first scheduled after that (a small object, a loaded
// machine), it reads the cleared channel, nil, and waits on it forever
// (nats.go v1.55.0, jetstream/publish.go and object.go; a CI run failed
// so). It holds nothing of ours, and no connection of ours outlives a test.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		deadline := time.Now().Add(leakWait)
		natsPutLeak := goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect")
		for err := goleak.Find(natsPutLeak); err != nil; err = goleak.Find(natsPutLeak) {
			if time.Now().After(deadline) {
				fmt.Fprintln(os.Stderr, "goleak:", err)
				code = 1
				break
			}
		}
	}
	os.Exit(code)
}

const leakWait = 15 * time.Second

const testProject = "proj"

// start starts a fleet server in a fresh directory, shut down at the end
// of the test.
func start(t testing.TB, cfg Config) *Server {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	if cfg.Project == "" {
		cfg.Project = testProject
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Start(ctx, cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// serve attaches to s an executor that answers the workers' pulls (and
// refuses their claims: it has no runs), until the test ends.
func serve(t testing.TB, s *Server) *Executor {
	t.Helper()
	e, err := NewExecutor(context.Background(), s.Conn(), s.Subjects(), ExecutorOptions{Log: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	s.Attach(e)
	return e
}

// connect connects as the worker whose credentials are at path, with
// extra options, closed at the end of the test.
func connect(t testing.TB, s *Server, path string, extra ...nats.Option) (*nats.Conn, error) {
	t.Helper()
	c, err := LoadCredentials(path)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := c.Options()
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(s.ClientURL(), append(opts, extra...)...)
	if err == nil {
		t.Cleanup(nc.Close)
	}
	return nc, err
}

func addWorker(t testing.TB, s *Server, name string) Worker {
	t.Helper()
	w, err := s.AddWorker(context.Background(), name)
	if err != nil {
		t.Fatalf("AddWorker(%q): %v", name, err)
	}
	return w
}

// listeners are the TCP sockets this process listens on, as host:port,
// read from /proc: the sockets the process holds (its fds) that the
// kernel's tables say are listening.
func listeners(t *testing.T) []string {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	var out []string
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // the header
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			const listen = "0A"
			if len(fields) < 10 || fields[3] != listen || !inodes[fields[9]] {
				continue
			}
			out = append(out, procAddr(t, fields[1]))
		}
		f.Close()
	}
	slices.Sort(out)
	return out
}

// procAddr reads /proc/net/tcp's hex address:port (the address in the
// host's byte order, 32-bit words).
func procAddr(t *testing.T, s string) string {
	hexIP, hexPort, _ := strings.Cut(s, ":")
	b, err := hex.DecodeString(hexIP)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+4 <= len(b); i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	port, err := strconv.ParseUint(hexPort, 16, 16)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort(net.IP(b).String(), strconv.FormatUint(port, 10))
}

func TestServerListensOnLoopbackOnly(t *testing.T) {
	before := listeners(t)
	s := start(t, Config{})
	u, err := url.Parse(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	if u.Scheme != "nats" || u.Hostname() != "127.0.0.1" {
		t.Errorf("ClientURL() = %s, want nats://127.0.0.1:PORT", s.ClientURL())
	}
	// One listener more, the client one on loopback: no monitoring port,
	// no cluster, gateway or leaf node listener.
	var added []string
	for _, l := range listeners(t) {
		if !slices.Contains(before, l) {
			added = append(added, l)
		}
	}
	if want := []string{u.Host}; !slices.Equal(added, want) {
		t.Errorf("the server added listeners %v, want only %v", added, want)
	}

	// Reachable on loopback, not on the machine's other addresses.
	c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", u.Host, err)
	}
	c.Close()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	tried := 0
	for _, a := range addrs {
		ipnet, ok := a.(*net.IPNet)
		if !ok || ipnet.IP.IsLoopback() || ipnet.IP.IsLinkLocalUnicast() {
			continue
		}
		tried++
		addr := net.JoinHostPort(ipnet.IP.String(), u.Port())
		if c, err := net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
			c.Close()
			t.Errorf("dial %s succeeded: the server is reachable beyond loopback", addr)
		}
	}
	if tried == 0 {
		t.Log("the machine has no address but loopback: only the listener count holds the rule")
	}
}

func TestServerRefusesAnonymousConnections(t *testing.T) {
	s := start(t, Config{})
	nc, err := nats.Connect(s.ClientURL())
	if err == nil {
		nc.Close()
		t.Fatal("a connection without credentials was accepted")
	}
	if !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("Connect without credentials = %v, want %v", err, nats.ErrAuthorization)
	}
}

func TestStartRefuses(t *testing.T) {
	cert, key := selfSigned(t)
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"every interface without TLS", Config{Listen: ":0"},
			`fleet: listen address ":0" is reachable from other machines and needs TLS: set nats.tls.cert and nats.tls.key, or listen on 127.0.0.1`},
		{"a certificate without its key", Config{TLSCert: cert},
			"fleet: TLS needs both a certificate and its key (nats.tls.cert, nats.tls.key)"},
		{"a key without its certificate", Config{TLSKey: key},
			"fleet: TLS needs both a certificate and its key (nats.tls.cert, nats.tls.key)"},
		{"a key that is not the certificate's", Config{TLSCert: cert, TLSKey: cert}, "fleet: TLS (nats.tls.cert "},
		{"a project name with a dot", Config{Project: "a.b"}, `fleet: project name "a.b" is not allowed`},
		{"a relative directory", Config{Dir: "state"}, `fleet: the state directory "state" is not absolute`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.cfg.Dir == "" {
				tt.cfg.Dir = t.TempDir()
			}
			if tt.cfg.Project == "" {
				tt.cfg.Project = testProject
			}
			s, err := Start(context.Background(), tt.cfg)
			if err == nil {
				s.Shutdown()
				t.Fatalf("Start(%+v) succeeded", tt.cfg)
			}
			if !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("Start() = %v\nwant %s…", err, tt.want)
			}
		})
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key, PEM.
func selfSigned(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "ctxgraphd test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func TestTLSListenerRefusesPlainConnections(t *testing.T) {
	cert, key := selfSigned(t)
	s := start(t, Config{Listen: "127.0.0.1:0", TLSCert: cert, TLSKey: key})
	w := addWorker(t, s, "a")
	u, err := url.Parse(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}

	// Honest: TLS with a certificate the worker trusts.
	pool := x509.NewCertPool()
	pemCert, err := os.ReadFile(cert)
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(pemCert)
	nc, err := connect(t, s, w.Path, nats.Secure(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
	if err != nil {
		t.Fatalf("a worker over TLS: %v", err)
	}
	if err := nc.Publish(s.Subjects().Worker("a").Heartbeat, nil); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatalf("a worker over TLS: %v", err)
	}

	// Without TLS: the server answers the protocol in clear with a TLS
	// handshake, and closes the connection: no PONG comes back.
	c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	info, err := r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info, `"tls_required":true`) {
		t.Errorf("INFO = %s, want tls_required", info)
	}
	if _, err := c.Write([]byte("CONNECT {\"verbose\":false}\r\nPING\r\n")); err != nil {
		t.Fatal(err)
	}
	rest, err := r.ReadString('\n')
	var ne net.Error
	switch {
	case strings.Contains(rest, "PONG"):
		t.Fatalf("the TLS listener answered a plain PING: %q", rest)
	case errors.As(err, &ne) && ne.Timeout():
		t.Fatalf("the TLS listener kept a plain connection open for 10s")
	case err == nil:
		t.Fatalf("the TLS listener answered in clear: %q", rest)
	}

	// And nats.go, asked for no TLS, does not get a connection.
	if _, err := nats.Connect("nats://"+u.Host, nats.UserInfo("x", "y")); err == nil {
		t.Error("a plain connection to the TLS listener was accepted")
	}
}

// TestMonitorServesTheQueueForAScaler: with Monitor, the server's figures
// (/jsz) show the work queue and its consumer, as KEDA's nats-jetstream
// scaler reads them; without it, no HTTP listener at all (TestListens…).
func TestMonitorServesTheQueueForAScaler(t *testing.T) {
	s := start(t, Config{Monitor: "127.0.0.1:0"})
	a := s.MonitorAddr()
	if a == nil {
		t.Fatal("no monitoring listener")
	}
	resp, err := http.Get("http://" + a.String() + "/jsz?consumers=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{s.Subjects().LanesStream(), `"` + s.Subjects().LanesConsumer() + `"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/jsz does not show %s:\n%.2000s", want, body)
		}
	}
	if plain := start(t, Config{}); plain.MonitorAddr() != nil {
		t.Errorf("a server without Monitor listens for HTTP on %v", plain.MonitorAddr())
	}
}

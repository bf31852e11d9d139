package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// defaultURL is the server used when neither --url nor REDIS_URL names one (said on stderr).
const defaultURL = "redis://127.0.0.1:6379"

// wantURL says what --url takes; it ends every complaint about one.
const wantURL = "want redis://[user:pass@]host:port[/db] or host:port (rediss:// for TLS, unix:///path for a socket)"

// list is a flag that may be repeated or given comma-separated.
type list []string

func (l *list) String() string { return strings.Join(*l, ",") }
func (l *list) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// duration is a time.Duration flag whose error says what to type.
type duration struct{ d *time.Duration }

func (d duration) String() string {
	if d.d == nil {
		return ""
	}
	return d.d.String()
}

func (d duration) Set(v string) error {
	x, err := time.ParseDuration(v)
	if err != nil || x < 0 {
		return errors.New("want a duration such as 300ms, 5s or 1m")
	}
	*d.d = x
	return nil
}

// durationVar registers a duration flag with a helpful error.
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var(duration{p}, name, usage)
}

// conn holds the flags every command takes: where Redis is, how to reach it, the key prefix and
// the output format. They may be given before or after the command and its arguments.
type conn struct {
	urls      list
	cluster   bool
	sentinels list
	master    string
	prefix    string
	cacert    string
	insecure  bool
	timeout   time.Duration
	json      bool

	target string // the server connected to, password hidden: for error hints
}

// globalOrder is the order in which the help lists the flags every command takes.
var globalOrder = []string{"url", "cluster", "sentinel", "master", "cacert", "insecure", "prefix", "timeout", "json", "output"}

func (c *conn) register(fs *flag.FlagSet) {
	fs.Var(&c.urls, "url", "the Redis server, a `URL`: redis://[user:pass@]host:port[/db] or host:port, rediss:// for TLS, "+
		"unix:///path for a socket; default $REDIS_URL, else "+defaultURL+" (said on stderr); with --cluster, "+
		"seed nodes (repeat --url, or separate them by commas)")
	fs.BoolVar(&c.cluster, "cluster", false, "connect to a Redis Cluster through the --url seed node(s)")
	fs.Var(&c.sentinels, "sentinel", "a Sentinel at `ADDR`, host:port (repeatable), and --master NAME its master; --url "+
		"gives the master's credentials, db and TLS")
	fs.StringVar(&c.master, "master", "", "the master `NAME` Sentinel monitors")
	fs.StringVar(&c.cacert, "cacert", "", "PEM `FILE` of the CA that signed the server's certificate (rediss://)")
	fs.BoolVar(&c.insecure, "insecure", false, "do not verify the server's TLS certificate")
	fs.StringVar(&c.prefix, "prefix", "lockkit:", "the key `PREFIX` of the lockkit clients (core.WithPrefix)")
	durationVar(fs, &c.timeout, "timeout", 5*time.Second, "timeout of each request to Redis, a `DURATION` such as 300ms, 5s, 1m")
	fs.BoolVar(&c.json, "json", false, "print JSON Lines: one JSON object per line (ls: one per lock or semaphore name; "+
		"inspect, release, idem, version: one; watch: one per event)")
	out := output{&c.json}
	fs.Var(out, "output", "the output `FORMAT`: text (default) or json (the same as --json); -o for short")
	fs.Var(out, "o", "the same as --output")
}

// output is the --output (-o) flag: text or json, as kubectl's and etcdctl's -o.
type output struct{ json *bool }

func (o output) String() string {
	if o.json != nil && *o.json {
		return "json"
	}
	return ""
}

func (o output) Set(v string) error {
	switch v {
	case "json":
		*o.json = true
	case "text":
		*o.json = false
	default:
		return errors.New("want text or json")
	}
	return nil
}

// parseURL reads one --url (or REDIS_URL) value: a redis://, rediss:// or unix:// URL, or host:port.
func parseURL(v string) (*redis.Options, error) {
	bad := fmt.Errorf("invalid --url %q: %s", redact(v), wantURL)
	if !strings.Contains(v, "://") {
		if err := checkHostPort(v); err != nil {
			return nil, bad
		}
		v = "redis://" + v
	}
	o, err := redis.ParseURL(v)
	if err != nil {
		return nil, bad
	}
	return o, nil
}

// checkHostPort accepts host:port with a port from 1 to 65535.
func checkHostPort(v string) error {
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return err
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || host == "" {
		return errors.New("bad host:port")
	}
	return nil
}

// userinfo finds the password of a URL that url.Parse rejects.
var userinfo = regexp.MustCompile(`//([^:@/]*):[^@/]*@`)

// redact hides the password of a URL.
func redact(v string) string {
	if u, err := url.Parse(v); err == nil && u.User != nil {
		return u.Redacted()
	}
	return userinfo.ReplaceAllString(v, "//$1:xxxxx@")
}

// client returns the go-redis client the flags describe. When no server is named it says, on
// note, which one it uses.
func (c *conn) client(note io.Writer) (redis.UniversalClient, error) {
	urls := c.urls
	if len(urls) == 0 {
		u := os.Getenv("REDIS_URL")
		if u == "" && len(c.sentinels) == 0 {
			fmt.Fprintf(note, "lockkit: no --url or REDIS_URL; using %s\n", defaultURL)
		}
		if u == "" {
			u = defaultURL
		}
		urls = list{u}
	}
	var (
		opts    []*redis.Options
		targets []string
	)
	for _, u := range urls {
		targets = append(targets, redact(u))
		o, err := parseURL(u)
		if err != nil {
			return nil, usageError{error: err}
		}
		if err := c.tls(o); err != nil {
			return nil, err
		}
		opts = append(opts, o)
	}
	c.target = strings.Join(targets, ",")
	o := opts[0]
	switch {
	case c.cluster && len(c.sentinels) > 0:
		return nil, usageError{error: errors.New("--cluster and --sentinel exclude each other")}
	case c.cluster:
		co := &redis.ClusterOptions{Username: o.Username, Password: o.Password, TLSConfig: o.TLSConfig,
			ReadTimeout: c.timeout, WriteTimeout: c.timeout, DialTimeout: c.timeout, DisableIdentity: true,
			MaxRetries: 1, DialerRetries: 1}
		for _, x := range opts {
			co.Addrs = append(co.Addrs, x.Addr)
		}
		return redis.NewClusterClient(co), nil
	case len(c.sentinels) > 0:
		if c.master == "" {
			return nil, usageError{error: errors.New("--sentinel needs --master NAME")}
		}
		for _, s := range c.sentinels {
			if checkHostPort(s) != nil {
				return nil, usageError{error: fmt.Errorf("invalid --sentinel %q: want host:port", s)}
			}
		}
		c.target = "Sentinel " + c.sentinels.String() + ", master " + c.master
		return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: c.master, SentinelAddrs: c.sentinels,
			Username: o.Username, Password: o.Password, DB: o.DB, TLSConfig: o.TLSConfig,
			ReadTimeout: c.timeout, WriteTimeout: c.timeout, DialTimeout: c.timeout, DisableIdentity: true,
			MaxRetries: 1, DialerRetries: 1}), nil
	case len(opts) > 1:
		return nil, usageError{error: errors.New("several --url need --cluster")}
	}
	o.ReadTimeout, o.WriteTimeout, o.DialTimeout, o.DisableIdentity = c.timeout, c.timeout, c.timeout, true
	o.MaxRetries, o.DialerRetries = 1, 1 // an operator's command: fail fast
	return redis.NewClient(o), nil
}

// tls applies --cacert and --insecure to a rediss:// URL's options.
func (c *conn) tls(o *redis.Options) error {
	if o.TLSConfig == nil {
		if c.cacert != "" || c.insecure {
			return usageError{error: errors.New("--cacert and --insecure need a rediss:// URL")}
		}
		return nil
	}
	if c.cacert != "" {
		pem, err := os.ReadFile(c.cacert)
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--cacert %s: no certificate found", c.cacert)
		}
		o.TLSConfig.RootCAs = pool
	}
	o.TLSConfig.InsecureSkipVerify = c.insecure //nolint:gosec // asked for
	if o.TLSConfig.MinVersion == 0 {
		o.TLSConfig.MinVersion = tls.VersionTLS12
	}
	return nil
}

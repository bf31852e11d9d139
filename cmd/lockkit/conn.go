package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

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

// conn holds the connection flags every command takes.
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
}

func (c *conn) register(fs *flag.FlagSet, read bool) {
	fs.Var(&c.urls, "url", "Redis URL: redis://[user:pass@]host:port[/db], rediss:// for TLS (default $REDIS_URL, else redis://127.0.0.1:6379); with --cluster, one or more seed nodes")
	fs.BoolVar(&c.cluster, "cluster", false, "connect to a Redis Cluster through the --url seed node(s)")
	fs.Var(&c.sentinels, "sentinel", "Sentinel address host:port (repeatable); needs --master; credentials, db and TLS come from --url")
	fs.StringVar(&c.master, "master", "", "the master name Sentinel monitors")
	fs.StringVar(&c.prefix, "prefix", "lockkit:", "the key prefix of the lockkit clients (core.WithPrefix)")
	fs.StringVar(&c.cacert, "cacert", "", "PEM file of the CA that signed the server's certificate (rediss://)")
	fs.BoolVar(&c.insecure, "insecure", false, "do not verify the server's TLS certificate")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Second, "timeout of each request to Redis")
	if read {
		fs.BoolVar(&c.json, "json", false, "print JSON")
	}
}

// client returns the go-redis client the flags describe.
func (c *conn) client() (redis.UniversalClient, error) {
	urls := c.urls
	if len(urls) == 0 {
		u := os.Getenv("REDIS_URL")
		if u == "" {
			u = "redis://127.0.0.1:6379"
		}
		urls = list{u}
	}
	var opts []*redis.Options
	for _, u := range urls {
		o, err := redis.ParseURL(u)
		if err != nil {
			return nil, usageError{fmt.Errorf("--url: %w", err)}
		}
		if err := c.tls(o); err != nil {
			return nil, err
		}
		opts = append(opts, o)
	}
	o := opts[0]
	switch {
	case c.cluster && len(c.sentinels) > 0:
		return nil, usageError{errors.New("--cluster and --sentinel exclude each other")}
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
			return nil, usageError{errors.New("--sentinel needs --master")}
		}
		return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: c.master, SentinelAddrs: c.sentinels,
			Username: o.Username, Password: o.Password, DB: o.DB, TLSConfig: o.TLSConfig,
			ReadTimeout: c.timeout, WriteTimeout: c.timeout, DialTimeout: c.timeout, DisableIdentity: true,
			MaxRetries: 1, DialerRetries: 1}), nil
	case len(opts) > 1:
		return nil, usageError{errors.New("several --url need --cluster")}
	}
	o.ReadTimeout, o.WriteTimeout, o.DialTimeout, o.DisableIdentity = c.timeout, c.timeout, c.timeout, true
	o.MaxRetries, o.DialerRetries = 1, 1 // an operator's command: fail fast
	return redis.NewClient(o), nil
}

// tls applies --cacert and --insecure to a rediss:// URL's options.
func (c *conn) tls(o *redis.Options) error {
	if o.TLSConfig == nil {
		if c.cacert != "" || c.insecure {
			return usageError{errors.New("--cacert and --insecure need a rediss:// URL")}
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

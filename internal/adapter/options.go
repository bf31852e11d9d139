package adapter

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/lockkit/lockkit/core"
)

// DefaultWait is every adapter's default for WithWait: 0, try once. A unit of work whose key is
// held is answered "busy" at once, the way its ecosystem says it (HTTP 409 or 429 with
// Retry-After, gRPC ABORTED or RESOURCE_EXHAUSTED with RetryInfo, asynq's KeyBusyError with a
// retry delay, a skipped cron tick), carrying the holder's remaining TTL so that the caller knows
// when to come back. Waiting is asked for with WithWait.
const DefaultWait time.Duration = 0

// Options are the options every adapter has. An adapter's options struct embeds them (or
// KeyOptions), starts from New, applies the user's options — the exported With* functions call
// the setters below, which record the option's name — and calls Validate once, at construction.
//
// A mode of the lock (a read or a write side, chosen per unit of work) is not a field: it is an
// option of the adapter that passes the matching core.AcquireOption to Acquire per call, and is
// refused with Validate by the constructors that do not serve it.
type Options struct {
	// Pkg names the adapter in errors and log messages ("httpmw").
	Pkg string
	// TTL is the TTL of the lock (or permit) taken per unit of work (WithTTL).
	TTL time.Duration
	// Wait is how long a unit of work waits for a held key (WithWait); DefaultWait is 0.
	Wait time.Duration
	// Logger receives what the caller is not told (WithLogger); nil means slog.Default() (Log).
	Logger *slog.Logger
	// Namespace is the core namespace of the adapter's locks (WithNamespace, core.InNamespace).
	Namespace string
	// Limit, if positive, makes a key's unit of work take one of Limit permits of the key's
	// semaphore (core.Permits) instead of its lock (WithLimit).
	Limit int

	given   []string           // the names of the options applied, each once
	permits core.AcquireOption // core.Permits(Limit), built by Validate
}

// New returns the options every adapter starts from: its package name, its default TTL and its
// namespace, DefaultWait, no limit, and slog.Default() as the logger.
func New(pkg string, ttl time.Duration, namespace string) Options {
	return Options{Pkg: pkg, TTL: ttl, Wait: DefaultWait, Namespace: namespace}
}

// Given records that the option called name was applied. The setters call it; an adapter calls it
// from each option of its own, so that Validate can refuse one given to the wrong constructor.
func (o *Options) Given(name string) {
	if !slices.Contains(o.given, name) {
		o.given = append(o.given, name)
	}
}

// Has reports whether the option called name was applied.
func (o *Options) Has(name string) bool { return slices.Contains(o.given, name) }

// SetTTL is WithTTL.
func (o *Options) SetTTL(d time.Duration) { o.TTL = d; o.Given("WithTTL") }

// SetWait is WithWait.
func (o *Options) SetWait(d time.Duration) { o.Wait = d; o.Given("WithWait") }

// SetLogger is WithLogger.
func (o *Options) SetLogger(l *slog.Logger) { o.Logger = l; o.Given("WithLogger") }

// SetNamespace is WithNamespace.
func (o *Options) SetNamespace(ns string) { o.Namespace = ns; o.Given("WithNamespace") }

// SetLimit is WithLimit.
func (o *Options) SetLimit(n int) { o.Limit = n; o.Given("WithLimit") }

// Validate checks the shared options, with one wording for every adapter, and refuses any option
// named in refused that was given: those are the options of the package's other constructors,
// which ctor (the constructor's name, "KeyLock") would ignore. The error is Invalid's.
func (o *Options) Validate(ctor string, refused ...string) error {
	for _, name := range o.given {
		if slices.Contains(refused, name) {
			return Invalid(o.Pkg, "%s does not apply to %s", name, ctor)
		}
	}
	if err := CheckTTL(o.Pkg, "WithTTL", o.TTL); err != nil {
		return err
	}
	if err := CheckWait(o.Pkg, o.Wait); err != nil {
		return err
	}
	if err := CheckNamespace(o.Pkg, o.Namespace); err != nil {
		return err
	}
	if o.Has("WithLimit") {
		if err := CheckLimit(o.Pkg, o.Limit); err != nil {
			return err
		}
		o.permits = core.Permits(o.Limit)
	}
	return nil
}

// Log returns where to log: the logger given, or slog.Default() read now, so that a
// slog.SetDefault after construction counts. slog.New(slog.DiscardHandler) is the way to silence
// an adapter.
func (o *Options) Log() *slog.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return slog.Default()
}

// Warn logs "lockkit: PKG: msg" at Warn with attrs and err, if any. ctx's values reach the handler
// (trace and request IDs); its cancellation does not.
func (o *Options) Warn(ctx context.Context, msg string, err error, attrs ...slog.Attr) {
	if err != nil {
		attrs = append(attrs[:len(attrs):len(attrs)], slog.Any("error", err))
	}
	o.Log().LogAttrs(context.WithoutCancel(ctx), slog.LevelWarn, "lockkit: "+o.Pkg+": "+msg, attrs...)
}

// KeyOptions are Options with the key of a unit of work described by In (an *http.Request, a
// gRPC call, an asynq task): WithKey gives one key, WithKeys several, taken all or nothing.
type KeyOptions[In any] struct {
	Options
	// Key returns the one key of a unit of work (WithKey); "" means no lock.
	Key func(In) (string, error)
	// Keys returns the keys of a unit of work (WithKeys); none means no lock.
	Keys func(In) ([]string, error)
}

// SetKey is WithKey.
func (o *KeyOptions[In]) SetKey(f func(In) (string, error)) { o.Key = f; o.Given("WithKey") }

// SetKeys is WithKeys.
func (o *KeyOptions[In]) SetKeys(f func(In) ([]string, error)) { o.Keys = f; o.Given("WithKeys") }

// Validate is Options.Validate, and checks the key options: a key source is set (WithKey, WithKeys
// or the adapter's default), WithKey and WithKeys are not both given, and WithKeys is not combined
// with WithLimit (a set of locks takes no permits: core.AcquireAll refuses core.Permits).
func (o *KeyOptions[In]) Validate(ctor string, refused ...string) error {
	if err := o.Options.Validate(ctor, refused...); err != nil {
		return err
	}
	switch {
	case o.Has("WithKey") && o.Key == nil:
		return Invalid(o.Pkg, "WithKey(nil)")
	case o.Has("WithKeys") && o.Keys == nil:
		return Invalid(o.Pkg, "WithKeys(nil)")
	case o.Has("WithKey") && o.Has("WithKeys"):
		return Invalid(o.Pkg, "WithKey and WithKeys cannot be combined: give one")
	case o.Keys != nil && o.Has("WithLimit"):
		return Invalid(o.Pkg, "WithKeys and WithLimit cannot be combined: a set of locks takes no permits")
	case o.Key == nil && o.Keys == nil:
		return Invalid(o.Pkg, "%s has no key: give it a KeyFunc or WithKeys", ctor)
	}
	return nil
}

// KeysOf returns the keys of in: those WithKeys gives, or the one WithKey gives. Empty keys are
// left out and a key given twice counts once, in the order of first appearance. No key means the
// work takes no lock.
func (o *KeyOptions[In]) KeysOf(in In) ([]string, error) {
	if o.Keys == nil {
		k, err := o.Key(in)
		if err != nil || k == "" {
			return nil, err
		}
		return []string{k}, nil
	}
	keys, err := o.Keys(in)
	if err != nil {
		return nil, err
	}
	return Distinct(keys), nil
}

// Distinct returns keys without empty and repeated keys, in the order of first appearance. It
// returns keys itself when there is nothing to drop, and never modifies it. It takes linear time
// for many keys, whatever the number a client sent (core refuses sets of more than 100 names).
func Distinct(keys []string) []string {
	var seen map[string]bool // past a few keys; below, a scan of the ones before is cheaper
	if len(keys) > 16 {
		seen = make(map[string]bool, len(keys))
	}
	dup := func(before []string, k string) bool {
		if seen != nil {
			return seen[k]
		}
		return slices.Contains(before, k)
	}
	for i, k := range keys {
		if k == "" || dup(keys[:i], k) {
			out := slices.Clone(keys[:i])
			for _, k := range keys[i+1:] {
				if k != "" && !dup(out, k) {
					out = append(out, k)
					if seen != nil {
						seen[k] = true
					}
				}
			}
			return out
		}
		if seen != nil {
			seen[k] = true
		}
	}
	return keys
}

// Join returns a keys function that gives the key of each of fs, for the adapters' Keys(fs...)
// helpers: a transfer locks the account of ByPathValue("from") and that of ByPathValue("to"). It
// panics with an Invalid error of pkg if one of fs is nil, as the helpers have no error result.
func Join[In any, F ~func(In) (string, error)](pkg string, fs []F) func(In) ([]string, error) {
	fs = slices.Clone(fs)
	for i, f := range fs {
		if f == nil {
			panic(Invalid(pkg, "Keys: key function %d is nil", i))
		}
	}
	return func(in In) ([]string, error) {
		keys := make([]string, 0, len(fs))
		for _, f := range fs {
			k, err := f(in)
			if err != nil {
				return nil, err
			}
			keys = append(keys, k)
		}
		return keys, nil
	}
}

// Package script owns lockkit's Redis protocol: the Lua scripts and how they are called.
//
// Each script is one entry file in lua/ whose header declares what it takes and needs:
//
//	--! keys: lock guard?          KEYS, by name; a trailing "?" marks an optional one
//	--! args: token ttl hold ...   ARGV, by name
//	--! flags: no-writes           a read-only script: sent with EVALSHA_RO, which a read-only ACL
//	                               user may run (Redis refuses any write in it)
//	--! include lock.lua           a part: shared functions (each included once, where it stands)
//	--! inline fence_rule.lua      a fragment: code, not functions, written each time it stands
//	                               (a hot path that must create no closure: each costs Redis
//	                               about 900 instructions per run)
//
// The loader binds the names to locals (k_lock, a_token, ...) and puts the parts where they are
// included (a hot path can come before the functions it does not need). Go calls each script
// through one typed builder (Acquire, Release, ...) whose fields name the keys and arguments in
// the header's order; a test checks the two against each other. docs/keys.md documents the keys
// and values the scripts keep.
package script

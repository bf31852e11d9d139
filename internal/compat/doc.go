// Package compat is lockkit's mixed-version check (`make compat`, docs/compat.md): a worker built
// at a baseline commit and one built at HEAD (package main in ./worker) take every kind of hold on
// the same names of one redis-server, and the oracle here reads what both recorded. It holds no
// library code, and is a module of its own so that lockkit's users never build it.
package compat

// Package cronlock wraps robfig/cron/v3 jobs so that each scheduled tick of a job runs once across
// all replicas, without a leader election.
package cronlock

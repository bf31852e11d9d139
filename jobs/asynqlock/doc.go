// Package asynqlock is asynq middleware that takes a lockkit lock per task key, so that tasks with
// the same key never run at once across all workers.
package asynqlock

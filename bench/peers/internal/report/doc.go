// Package report keeps the peer bench's measurements, round by round, and
// turns them into medians, same-round ratios, a markdown table and JSON.
//
// It knows nothing of Baton or DBOS: the figures are named by their callers.
// It must not import the other packages of the peer bench.
package report

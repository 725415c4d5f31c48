// Command dcgm-counters reads a dcgm-exporter counters file with the exporter's own rules and exits 1 on the first
// record the exporter would refuse at start-up.
//
// Source: NVIDIA/dcgm-exporter 4.5.3-4.8.2 (commit 691c92762eb551313c825f6efe4ceeee20982801),
// internal/pkg/counters/counter_config.go: ReadCSVFile (csv.NewReader, Comment '#', ReadAll: a record whose field
// count differs from the first record's is an error) and ExtractCounters (fields trimmed of spaces; exactly 3
// fields; the Prometheus type one of promMetricType's keys, variables.go).
package main

import (
	"encoding/csv"
	"fmt"
	"os"
	"strings"
)

// promMetricType in internal/pkg/counters/variables.go.
var promMetricType = map[string]bool{"gauge": true, "counter": true, "histogram": true, "summary": true, "label": true}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: dcgm-counters <counters.csv>")
		os.Exit(2)
	}
	file, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer file.Close()
	r := csv.NewReader(file)
	r.Comment = '#'
	records, err := r.ReadAll()
	if err != nil {
		fmt.Fprintf(os.Stderr, "refused: %v\n", err)
		os.Exit(1)
	}
	for i, record := range records {
		if len(record) == 0 {
			continue
		}
		for j, field := range record {
			record[j] = strings.Trim(field, " ")
		}
		if len(record) != 3 {
			fmt.Fprintf(os.Stderr, "refused: malformed CSV record; failed to parse line %d (`%v`), expected 3 fields\n", i, record)
			os.Exit(1)
		}
		if !promMetricType[record[1]] {
			fmt.Fprintf(os.Stderr, "refused: could not find Prometheus metric type '%s'\n", record[1])
			os.Exit(1)
		}
		fmt.Printf("%s\t%s\t%s\n", record[0], record[1], record[2])
	}
}

// The counters-file rules dcgm-exporter applies when it starts, as a program of ours (the exporter's parser is in
// an internal package and the exporter itself links NVIDIA's DCGM library).
module gpucluster.e2e/dcgm-counters

go 1.26.0

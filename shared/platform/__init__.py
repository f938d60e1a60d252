"""What every part stands on: settings, the error hierarchy, logs, metrics, failpoints, the
embedded Redis process, private directories, text pacing. Imports nothing else of memoryd."""

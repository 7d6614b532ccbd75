{{- define "seaweedfs.name" -}}
{{- if semverCompare ">=4.31.0-0" .Chart.Version -}}{{ .Release.Name }}-seaweedfs{{- else -}}seaweedfs{{- end -}}
{{- end -}}

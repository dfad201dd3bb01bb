{{/*
Labels of every object of component `.component` (operator, agent, admission): exactly those of
manifests/, plus .Values.commonLabels. Selectors use horus.selectorLabels, which never changes.
Call: include "horus.labels" (dict "root" $ "component" "operator")
*/}}
{{- define "horus.selectorLabels" -}}
app.kubernetes.io/name: horus
{{- with .component }}
app.kubernetes.io/component: {{ . }}
{{- end }}
{{- end }}

{{- define "horus.labels" -}}
{{ include "horus.selectorLabels" . }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* <registry>/<repository>:<tag> or <registry>/<repository>@<digest>. */}}
{{- define "horus.image" -}}
{{- $image := .Values.image -}}
{{- with $image.registry }}{{ trimSuffix "/" . }}/{{ end -}}
{{- $image.repository -}}
{{- if $image.digest }}@{{ $image.digest }}{{ else }}:{{ $image.tag | default .Chart.AppVersion }}{{ end -}}
{{- end }}

{{- define "horus.operatorNamespace" -}}
{{ .Values.namespaces.operator.name }}
{{- end }}

{{- define "horus.agentNamespace" -}}
{{ .Values.namespaces.agent.name }}
{{- end }}

{{/*
The components that export Prometheus metrics, as a list of dicts (component, namespace, port):
the one place the metrics templates read. The operator, and the node agent where it is enabled.
*/}}
{{- define "horus.metricsEndpoints" -}}
{{- $endpoints := list (dict "component" "operator" "namespace" (include "horus.operatorNamespace" .) "port" .Values.operator.metricsPort) -}}
{{- if .Values.agent.enabled -}}
{{- $endpoints = append $endpoints (dict "component" "agent" "namespace" (include "horus.agentNamespace" .) "port" .Values.agent.metricsPort) -}}
{{- end -}}
{{- toJson $endpoints -}}
{{- end }}

{{/* Prometheus scrape annotations for a pod exporting metrics on port `.port` (when metrics.enabled). */}}
{{- define "horus.scrapeAnnotations" -}}
{{- if .root.Values.metrics.enabled }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .port | toString | quote }}
prometheus.io/path: /metrics
{{- end }}
{{- end }}

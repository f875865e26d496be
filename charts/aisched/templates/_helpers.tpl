{{/* The image of every component: repository@digest, or repository:tag
(the chart's appVersion unless image.tag is set). */}}
{{- define "aisched.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* Labels of every object of component (the argument's "component"). */}}
{{- define "aisched.labels" -}}
{{ include "aisched.selectorLabels" . }}
app.kubernetes.io/part-of: aisched
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The labels that select a component's pods; they never change, so that
upgrades keep the selectors of Deployments and DaemonSets. */}}
{{- define "aisched.selectorLabels" -}}
app.kubernetes.io/name: aisched-{{ .component }}
{{- end -}}

{{/* Pod spec fields shared by every component: pull secrets, node
selection and, unless affinity is set, replicas spread over nodes. */}}
{{- define "aisched.podPlacement" -}}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if .values.affinity }}
affinity:
  {{- toYaml .values.affinity | nindent 2 }}
{{- else if hasKey .values "replicas" }}
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- include "aisched.selectorLabels" . | nindent 14 }}
{{- end }}
{{- end -}}

{{/* The security context of every container but the agent's. */}}
{{- define "aisched.securityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities: {drop: [ALL]}
seccompProfile: {type: RuntimeDefault}
{{- end -}}

{{/* A PodDisruptionBudget of a component whose values have one. */}}
{{- define "aisched.pdb" -}}
{{- $pdb := .values.podDisruptionBudget -}}
{{- if $pdb.enabled }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: aisched-{{ .component }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "aisched.labels" . | nindent 4 }}
spec:
  {{- if hasKey $pdb "minAvailable" }}
  minAvailable: {{ $pdb.minAvailable }}
  {{- else }}
  maxUnavailable: {{ $pdb.maxUnavailable }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "aisched.selectorLabels" . | nindent 6 }}
{{- end }}
{{- end -}}

{{/* A ServiceMonitor of a component's metrics Service, when enabled. */}}
{{- define "aisched.serviceMonitor" -}}
{{- $sm := .root.Values.metrics.serviceMonitor -}}
{{- if $sm.enabled }}
---
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: aisched-{{ .component }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "aisched.labels" . | nindent 4 }}
    {{- with $sm.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  selector:
    matchLabels:
      {{- include "aisched.selectorLabels" . | nindent 6 }}
      aisched.io/metrics: "true"
  endpoints:
    - port: metrics
      interval: {{ $sm.interval }}
      {{- with .endpoint }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
{{- end }}
{{- end -}}

{{/* The annotations of a webhook configuration whose caBundle cert-manager's CA injector fills, when cert-manager issues the webhook's certificate. */}}
{{- define "aisched.webhookCAAnnotation" -}}
{{- if .Values.controller.webhook.certManager.enabled -}}
annotations:
  cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/aisched-controller-webhook
{{- end -}}
{{- end -}}

{{/* The caBundle a webhook of an existing configuration holds, kept across upgrades: the controller or cert-manager put it there. */}}
{{- define "aisched.keptCABundle" -}}
{{- if .existing -}}
{{- range .existing.webhooks -}}
{{- if eq .name $.name -}}
{{- with .clientConfig.caBundle -}}
caBundle: {{ . }}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

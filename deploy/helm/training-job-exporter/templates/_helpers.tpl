{{/*
Names. The chart's name is a constant rather than .Chart.Name: a parent chart that uses this
one as a dependency under an alias would otherwise rename every object, and the sidecar
templates must compute the same names as the objects this chart creates.
*/}}
{{- define "training-job-exporter.name" -}}
{{- default "training-job-exporter" .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "training-job-exporter.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := include "training-job-exporter.name" . }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "training-job-exporter.selectorLabels" -}}
app.kubernetes.io/name: {{ include "training-job-exporter.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "training-job-exporter.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "training-job-exporter.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "training-job-exporter.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "training-job-exporter.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "training-job-exporter.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag | toString) }}
{{- end }}

{{- define "training-job-exporter.telemetryPath" -}}
{{- dig "web" "telemetry_path" "/metrics" .Values.config }}
{{- end }}

{{/* "true" when the chart creates the credentials Secret. */}}
{{- define "training-job-exporter.createSecret" -}}
{{- $c := .Values.credentials }}
{{- if and (not .Values.existingSecret) (or $c.aihcAccessKeyId $c.aihcSecretAccessKey $c.alayaApiKey) }}true{{ end }}
{{- end }}

{{- define "training-job-exporter.secretName" -}}
{{- default (include "training-job-exporter.fullname" .) .Values.existingSecret }}
{{- end }}

{{/* The configuration file: `config` over files/exporter.yaml (a copy of the repository's
config/exporter.yaml, every key with its default) without its example targets and listen
address, after refusing values that would silently not apply. Maps merge key by key; any
other value, lists included, replaces the default. */}}
{{- define "training-job-exporter.configFile" -}}
{{- $config := .Values.config | default dict }}
{{- $merged := .Files.Get "files/exporter.yaml" | fromYaml }}
{{- $_ := unset $merged "aihc" }}
{{- $_ := unset $merged "alaya" }}
{{- $_ := unset (get $merged "web") "listen_address" }}
{{- range $key, $value := $config }}
{{- $default := get $merged $key }}
{{- if and (kindIs "map" $value) (kindIs "map" $default) }}
{{- $_ := set $merged $key (mergeOverwrite (deepCopy $default) $value) }}
{{- else }}
{{- $_ := set $merged $key $value }}
{{- end }}
{{- end }}
{{- if dig "web" "listen_address" "" $config }}
{{- fail "config.web.listen_address: set `port` instead; the chart passes --web.listen-address from it" }}
{{- end }}
{{- range $i, $target := $config.aihc | default list }}
{{- range $key := list "access_key_id" "secret_access_key" }}
{{- if hasKey $target $key }}
{{- fail (printf "config.aihc[%d].%s: a ConfigMap is no place for credentials; use credentials.*, existingSecret or %s_file" $i $key $key) }}
{{- end }}
{{- end }}
{{- end }}
{{- range $i, $target := $config.alaya | default list }}
{{- if hasKey $target "api_key" }}
{{- fail (printf "config.alaya[%d].api_key: a ConfigMap is no place for credentials; use credentials.alayaApiKey, existingSecret or api_key_file" $i) }}
{{- end }}
{{- end }}
{{- toYaml $merged }}
{{- end }}

{{/* Changes whenever the configuration or credentials do, to roll the pods. */}}
{{- define "training-job-exporter.checksum" -}}
{{- list (include "training-job-exporter.configFile" .) .Values.credentials .Values.existingSecret .Values.demo | toJson | sha256sum }}
{{- end }}

{{- define "training-job-exporter.args" -}}
- --config=/etc/training-job-exporter/exporter.yaml
- --web.listen-address=:{{ .Values.port }}
{{- if .Values.demo }}
- --demo
{{- end }}
{{- if eq .Values.mode "statefulset" }}
- --shard.index=$(SHARD_INDEX)
- --shard.count={{ .Values.replicas }}
{{- end }}
{{- with .Values.extraArgs }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "training-job-exporter.env" -}}
{{- if eq .Values.mode "statefulset" }}
# Set by the StatefulSet controller from the pod's ordinal (Kubernetes >= 1.28).
- name: SHARD_INDEX
  valueFrom:
    fieldRef:
      fieldPath: metadata.labels['apps.kubernetes.io/pod-index']
{{- end }}
{{- if or .Values.existingSecret (include "training-job-exporter.createSecret" .) }}
{{- $secret := include "training-job-exporter.secretName" . }}
{{- range $env, $key := dict "TJE_AIHC_ACCESS_KEY_ID" $.Values.secretKeys.aihcAccessKeyId "TJE_AIHC_SECRET_ACCESS_KEY" $.Values.secretKeys.aihcSecretAccessKey "TJE_ALAYA_API_KEY" $.Values.secretKeys.alayaApiKey }}
- name: {{ $env }}
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: {{ $key }}
      # A release may use one provider only.
      optional: true
{{- end }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
The exporter container: one list item, for a pod's `containers:`. Deployment, StatefulSet
and sidecar mode all use it. Its context is this chart's: in a parent chart pass
`.Subcharts.<alias>` (see README.md).
*/}}
{{- define "training-job-exporter.container" -}}
- name: {{ include "training-job-exporter.name" . }}
  image: {{ include "training-job-exporter.image" . | quote }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  args:
    {{- include "training-job-exporter.args" . | nindent 4 }}
  {{- with include "training-job-exporter.env" . | trim }}
  env:
    {{- . | nindent 4 }}
  {{- end }}
  ports:
    # Not `metrics`: in sidecar mode the port shares the pod with other containers' ports.
    - name: tje-metrics
      containerPort: {{ .Values.port }}
      protocol: TCP
  {{- with .Values.startupProbe }}
  startupProbe:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.livenessProbe }}
  livenessProbe:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.readinessProbe }}
  readinessProbe:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.securityContext }}
  securityContext:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  volumeMounts:
    - name: training-job-exporter-config
      mountPath: /etc/training-job-exporter
      readOnly: true
    - name: training-job-exporter-tmp
      mountPath: /tmp
    {{- with .Values.extraVolumeMounts }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end }}

{{/* The exporter's volumes: list items, for a pod's `volumes:`. */}}
{{- define "training-job-exporter.volumes" -}}
- name: training-job-exporter-config
  configMap:
    name: {{ include "training-job-exporter.fullname" . }}
- name: training-job-exporter-tmp
  emptyDir:
    sizeLimit: 16Mi
{{- with .Values.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The public names for sidecar mode; see README.md. */}}
{{- define "training-job-exporter.sidecarContainer" -}}
{{- include "training-job-exporter.requireSidecarMode" . }}
{{- include "training-job-exporter.container" . }}
{{- end }}

{{- define "training-job-exporter.sidecarVolumes" -}}
{{- include "training-job-exporter.requireSidecarMode" . }}
{{- include "training-job-exporter.volumes" . }}
{{- end }}

{{/* For the host pod template's annotations: rolls the pods when the configuration changes. */}}
{{- define "training-job-exporter.sidecarPodAnnotations" -}}
checksum/training-job-exporter: {{ include "training-job-exporter.checksum" . }}
{{- end }}

{{- define "training-job-exporter.requireSidecarMode" -}}
{{- if ne .Values.mode "sidecar" }}
{{- fail "training-job-exporter.sidecarContainer/sidecarVolumes need mode: sidecar in the exporter's values, or the chart would run its own Deployment too" }}
{{- end }}
{{- end }}

{{/* The pod template of the Deployment and the StatefulSet. */}}
{{- define "training-job-exporter.podTemplate" -}}
metadata:
  labels:
    {{- include "training-job-exporter.selectorLabels" . | nindent 4 }}
    {{- with .Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    checksum/training-job-exporter: {{ include "training-job-exporter.checksum" . }}
    {{- with .Values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ include "training-job-exporter.serviceAccountName" . }}
  # The exporter never talks to the Kubernetes API.
  automountServiceAccountToken: false
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  terminationGracePeriodSeconds: {{ .Values.terminationGracePeriodSeconds }}
  {{- with .Values.podSecurityContext }}
  securityContext:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  containers:
    {{- include "training-job-exporter.container" . | nindent 4 }}
  volumes:
    {{- include "training-job-exporter.volumes" . | nindent 4 }}
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}

{{/* Relabelings shared by the ServiceMonitor and the PodMonitor. */}}
{{- define "training-job-exporter.relabelings" -}}
# prometheus-operator sets the target label `pod` to the scraped pod; the exporter's series
# carry `pod` for the training job's pod. Keep the scraped pod as `exporter_pod` instead.
- sourceLabels: [pod]
  targetLabel: exporter_pod
- action: labeldrop
  regex: pod
{{- with . }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "training-job-exporter.checkMode" -}}
{{- if not (has .Values.mode (list "deployment" "statefulset" "sidecar")) }}
{{- fail (printf "mode: %q is not one of deployment, statefulset, sidecar" .Values.mode) }}
{{- end }}
{{- if and (eq .Values.mode "deployment") (ne (int .Values.replicas) 1) }}
{{- fail "replicas: a Deployment runs one replica (two would poll every job twice); use mode: statefulset to split jobs across replicas" }}
{{- end }}
{{- end }}
